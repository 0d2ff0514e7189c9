"""Activation layouts: planned from the weights, pinned while tracing."""

import dataclasses

import jax
import keras
import numpy as np
import pytest

from benchmarks._sharded_configs import Step
from benchmarks.collectives import collective_stats
from keras_nlp.distribution import LayoutError
from keras_nlp.distribution.activations import FREE
from keras_nlp.distribution.activations import ActivationPlan
from keras_nlp.distribution.activations import batch_size_scope
from keras_nlp.distribution.layout_map import verify_layouts
from keras_nlp.models import GemmaBackbone
from keras_nlp.models import GPT2Backbone
from tests.models.backbone_checks import make_mesh

multi_device = pytest.mark.multi_device

GEMMA = dict(
    vocabulary_size=64,
    num_layers=2,
    num_query_heads=8,
    num_key_value_heads=1,
    hidden_dim=32,
    intermediate_dim=64,
    head_dim=8,
)
GPT2 = dict(
    vocabulary_size=256,
    num_layers=2,
    num_heads=12,
    hidden_dim=96,
    intermediate_dim=384,
    dropout=0.0,
    max_sequence_length=64,
)


def _activations(plan):
    return {a.path: a for a in plan.activations}


def test_gemma_plan_pins_the_megatron_pattern():
    plan = GemmaBackbone.plan_layout({"batch": 1, "model": 8}, config=GEMMA)
    activations = _activations(plan)
    residual = [
        "token_embedding/output",
        "decoder_block_0/output",
        "decoder_block_1/output",
        "final_normalization/output",
    ]
    for path in residual:
        assert activations[path].spec == (FREE, None, None)
        assert activations[path].reason.startswith("residual stream")
    query = activations["decoder_block_0/attention/query/output"]
    assert query.spec == (FREE, None, "model", None)
    assert query.reason.startswith("column-parallel")
    output = activations["decoder_block_0/attention/attention_output/output"]
    assert output.spec == (FREE, None, None)
    assert output.reason.startswith("row-parallel")
    # The single key/value head is replicated: its output is not pinned.
    assert "decoder_block_0/attention/key/output" not in activations
    assert "activations pinned:    " in plan.summary()
    as_json = plan.to_dict()["activations"]
    assert {"path": query.path, "spec": ["*", None, "model", None]} == {
        k: v
        for k, v in as_json[
            [a["path"] for a in as_json].index(query.path)
        ].items()
        if k != "reason"
    }


def test_fsdp_axes_never_shard_activations():
    # On 2x4 the kernels' hidden dimensions are on 'batch' (FSDP); the
    # residual stream and row-parallel outputs stay whole.
    plan = GemmaBackbone.plan_layout({"batch": 2, "model": 4}, config=GEMMA)
    activations = _activations(plan)
    assert plan.weight(
        "decoder_block_0/attention/attention_output/kernel"
    ).spec == ("model", None, "batch")
    assert activations[
        "decoder_block_0/attention/attention_output/output"
    ].spec == (FREE, None, None)
    assert activations["decoder_block_0/ffw_gating/output"].spec == (
        FREE,
        None,
        "model",
    )


@multi_device
def test_map_pins_batch_only_where_it_divides():
    mesh = make_mesh((2, 4))
    layout_map = GemmaBackbone.get_layout_map(mesh, config=GEMMA)
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    key = "decoder_block_0/attention/query/output"
    seen = {}

    def traced(x):
        with distribution.scope():
            for batch in (4, 3):
                with batch_size_scope(batch):
                    seen[batch] = layout_map[key].axes
        return x

    with distribution.scope():
        # Eager calls get no activation layout (nothing to constrain).
        assert layout_map[key] is None
    jax.jit(traced)(np.zeros(()))
    assert seen[4] == ("batch", None, "model", None)
    assert seen[3] == (
        jax.sharding.PartitionSpec.UNCONSTRAINED,
        None,
        "model",
        None,
    )


def test_verification_names_an_activation_of_no_layer():
    backbone = GemmaBackbone(**GEMMA)
    plan = GemmaBackbone.plan_layout({"batch": 1, "model": 1}, config=GEMMA)
    bogus = ActivationPlan("decoder_block_9/output", (FREE, None, None), "x")
    plan = dataclasses.replace(plan, activations=plan.activations + (bogus,))
    if keras.backend.backend() != "jax":
        pytest.skip("only JAX shards variables")
    with pytest.raises(LayoutError, match="decoder_block_9/output"):
        verify_layouts(backbone, plan, make_mesh((1, 1)))


@multi_device
def test_gpt2_activations_stop_sequence_sharding():
    # GPT-2's position table is sharded on its rows; unpinned, XLA shards
    # the residual stream on the sequence and all-gathers it everywhere.
    mesh = make_mesh((1, 8))
    weights = [v.numpy() for v in GPT2Backbone(**GPT2).weights]
    measured = {}
    for pinned in (True, False):
        layout_map = GPT2Backbone.get_layout_map(mesh, config=GPT2)
        if not pinned:
            layout_map._install(
                dataclasses.replace(layout_map.plan, activations=())
            )
        distribution = keras.distribution.ModelParallel(
            layout_map=layout_map, batch_dim_name="batch"
        )
        with distribution.scope():
            backbone = GPT2Backbone(**GPT2)
        for variable, value in zip(backbone.weights, weights, strict=True):
            variable.assign(value)
        step = Step(backbone, distribution)
        stats = collective_stats(step.compiled_text("train"))
        measured[pinned] = sum(stat.bytes for stat in stats.values())
        loss = step.run_train()
        measured[pinned, "loss"] = loss
    assert measured[True] < 0.7 * measured[False]
    np.testing.assert_allclose(
        measured[True, "loss"], measured[False, "loss"], rtol=1e-5
    )


def test_sequence_parallel_plan_splits_the_residual_stream():
    mesh = {"batch": 1, "model": 8}
    plan = GemmaBackbone.plan_layout(mesh, config=GEMMA, sequence_parallel=True)
    enabled, reason = plan.sequence_parallel
    assert enabled and reason.startswith("on (asked for)")
    activations = _activations(plan)
    for path in ("token_embedding/output", "decoder_block_0/output"):
        assert activations[path].spec == (FREE, None, None)
        assert activations[path].sequence_axes == ("model",)
    output = activations["decoder_block_0/attention/attention_output/output"]
    assert output.sequence_axes == ("model",)
    assert "reduce-scattered" in output.reason
    # The row-parallel input keeps its heads on 'model', sequence whole.
    heads = activations["decoder_block_0/attention/attention_output/input"]
    assert heads.spec == (FREE, None, "model", None)
    assert heads.sequence_axes == ()
    gathered = activations["decoder_block_0/attention/query/input"]
    assert gathered.spec == (FREE, None, None)
    assert plan.to_dict()["sequence_parallel"]["enabled"] is True
    assert "sequence parallel:     on" in plan.summary()
    # "auto": off under the default policy, on under policy="memory".
    default = GemmaBackbone.plan_layout(mesh, config=GEMMA)
    assert default.sequence_parallel[0] is False
    assert "policy 'auto'" in default.sequence_parallel[1]
    assert not any(a.sequence_axes for a in default.activations)
    memory = GemmaBackbone.plan_layout(mesh, config=GEMMA, policy="memory")
    assert memory.sequence_parallel[0] is True
    one = GemmaBackbone.plan_layout(
        {"batch": 8, "model": 1}, config=GEMMA, sequence_parallel=True
    )
    assert one.sequence_parallel == (
        False,
        "off: the model axis has 1 device, so there is no all-reduce to split",
    )
    with pytest.raises(ValueError, match="sequence_parallel='yes'"):
        GemmaBackbone.plan_layout(mesh, config=GEMMA, sequence_parallel="yes")


@multi_device
def test_map_splits_the_sequence_only_where_it_divides():
    layout_map = GemmaBackbone.get_layout_map(
        make_mesh((2, 4)), config=GEMMA, sequence_parallel=True
    )
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    key = "decoder_block_0/output"
    seen = {}

    def traced(x):
        with distribution.scope():
            for length in (8, 6, None):
                with batch_size_scope(4, length):
                    seen[length] = layout_map[key].axes
        return x

    jax.jit(traced)(np.zeros(()))
    assert seen[8] == ("batch", "model", None)
    assert seen[6] == seen[None] == ("batch", None, None)


def test_context_axis_splits_every_sequence_and_gathers_keys():
    from keras_nlp.distribution import MeshShape

    mesh = MeshShape((2, 2, 2), ("batch", "context", "model"))
    plan = GemmaBackbone.plan_layout(mesh, config=GEMMA)
    # The mesh's "context" axis takes the role by default.
    assert plan.context_axis == "context"
    assert plan.to_dict()["context_axis"] == "context"
    activations = _activations(plan)
    for path in (
        "decoder_block_0/output",
        "decoder_block_0/attention/query/output",
        "decoder_block_0/attention/attention_output/output",
    ):
        assert activations[path].sequence_axes == ("context",), path
        assert "(context parallel)" in activations[path].reason
    keys = activations["decoder_block_0/attention/keys"]
    assert keys.spec == (FREE, None, None, None)
    assert keys.sequence_axes == ()
    assert "all-gathered over 'context'" in keys.reason
    # Weights shard FSDP-style over it; caches split their length over it
    # first (the one kv head is whole on 'model', so then over 'model').
    assert plan.weight("decoder_block_0/attention/query/kernel").spec == (
        "model",
        ("batch", "context"),
        None,
    )
    assert plan.kv_caches[0].length_axes == ("context", "model")
    with_sp = GemmaBackbone.plan_layout(
        mesh, config=GEMMA, sequence_parallel=True
    )
    residual = _activations(with_sp)["decoder_block_0/output"]
    assert residual.sequence_axes == ("context", "model")


@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            dict(context_parallel_dim_name="seq"),
            "context_parallel_dim_name='seq' is not an axis",
        ),
        (
            dict(context_parallel_dim_name="model"),
            "context_parallel_dim_name and model_parallel_dim_name",
        ),
    ],
)
def test_context_axis_errors_name_the_fix(arguments, message):
    with pytest.raises(ValueError, match=message):
        GemmaBackbone.plan_layout(
            {"batch": 2, "context": 2, "model": 2}, config=GEMMA, **arguments
        )


def test_context_axis_refuses_a_backbone_of_two_lengths():
    from keras_nlp.models import T5Backbone

    config = dict(
        vocabulary_size=64,
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        key_value_dim=8,
    )
    with pytest.raises(ValueError, match="T5Backbone cannot split its"):
        T5Backbone.plan_layout(
            {"batch": 2, "context": 2, "model": 2}, config=config
        )
