"""Where an axis that does not divide its dimension goes: the candidates,
their estimated costs (`keras_nlp.distribution.cost`) and the policies
`"auto"` (the default), `"memory"` and `"communication"` that choose."""

import json

import keras
import pytest

from keras_nlp.cli import main
from keras_nlp.distribution import DATA
from keras_nlp.distribution import MODEL
from keras_nlp.distribution import LayoutError
from keras_nlp.distribution import MeshShape
from keras_nlp.distribution import PlanRequest
from keras_nlp.distribution import VariableInfo
from keras_nlp.distribution import normalize_rules
from keras_nlp.distribution import resolve_layout
from keras_nlp.distribution.cost import CostModel
from keras_nlp.distribution.cost import estimate
from keras_nlp.distribution.cost import estimate_plan
from keras_nlp.distribution.layout_plan import ALTERNATIVE
from keras_nlp.distribution.layout_plan import FALLBACK
from keras_nlp.models import GemmaBackbone
from keras_nlp.models import GPT2Backbone
from keras_nlp.models import QwenBackbone
from tests.models.backbone_checks import assert_outputs_close
from tests.models.backbone_checks import make_mesh
from tests.models.test_conformance import ATOL
from tests.models.test_conformance import assert_follows_plan
from tests.models.test_conformance import forward
from tests.models.test_conformance import reference
from tests.models.zoo import build_with_weights


def key_kernel_plan(policy, hidden=64, mesh=(1, 8), tokens_per_step=16384):
    return resolve_layout(
        normalize_rules([("key", (DATA, MODEL, None))], "ToyBackbone"),
        [VariableInfo("key", (hidden, 2, 8), "float32", True)],
        PlanRequest(
            MeshShape(mesh, ("batch", "model")),
            policy=policy,
            tokens_per_step=tokens_per_step,
        ),
        owner="ToyBackbone",
    ).weight("key")


def test_memory_moves_the_model_axis_from_kv_heads_to_hidden():
    kept = key_kernel_plan("communication")
    assert kept.spec == ("batch", None, None)
    assert kept.decision == FALLBACK
    moved = key_kernel_plan("memory")
    assert moved.spec == (("batch", "model"), None, None)
    assert moved.shard_shape == (8, 2, 8)
    assert moved.decision == ALTERNATIVE and moved.fallbacks == ()
    assert "'model' shards dim 0 instead" in moved.reason
    # Where no other dimension divides, it still falls back.
    assert key_kernel_plan("memory", hidden=12).decision == FALLBACK


def test_an_unknown_policy_is_named():
    with pytest.raises(ValueError, match="policy='smallest'"):
        key_kernel_plan("smallest")


# The cells of 1B+ presets furthest from the ideal with replication.
@pytest.mark.parametrize(
    "backbone_cls, preset, mesh, replicated",
    [
        (GPT2Backbone, "gpt2_extra_large_en", (1, 8), 3.213),
        (QwenBackbone, "qwen2.5_7b_en", (1, 8), 1.756),
        (GemmaBackbone, "gemma2_2b_en", (1, 8), 1.329),
    ],
)
def test_memory_brings_presets_within_6_percent(
    backbone_cls, preset, mesh, replicated
):
    mesh = dict(zip(("batch", "model"), mesh, strict=True))
    communication = backbone_cls.plan_layout(mesh, preset=preset)
    assert communication.memory_ratio == pytest.approx(replicated, abs=1e-3)
    memory = backbone_cls.plan_layout(mesh, preset=preset, policy="memory")
    assert memory.memory_ratio <= 1.06
    assert memory.policy == "memory"
    # What still falls back has no other dimension to take the axis (the
    # per-head biases): under 1% of the model.
    whole = sum(w.bytes for w in memory.fallbacks)
    assert whole < 0.01 * memory.total_bytes
    assert sum(w.bytes for w in communication.fallbacks) > 10 * whole


@pytest.mark.multi_device
@pytest.mark.parametrize("name", ["GemmaBackbone", "GPT2Backbone"])
def test_memory_policy_builds_and_gives_the_unsharded_outputs(name):
    ref = reference(name, "tiny")
    layout_map = ref.backbone_cls.get_layout_map(
        make_mesh((1, 8)), policy="memory"
    )
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope():
        backbone = build_with_weights(
            ref.backbone_cls, ref.config, ref.backbone.weights
        )
    plan = assert_follows_plan(backbone, (1, 8))
    assert any(w.moved for w in plan.weights)
    with distribution.scope():
        outputs = forward(backbone, ref.inputs)
    assert_outputs_close(outputs, ref.outputs, atol=ATOL)


def test_strict_still_names_what_cannot_move():
    with pytest.raises(LayoutError, match="strict=True"):
        resolve_layout(
            normalize_rules([("key", (DATA, MODEL, None))], "ToyBackbone"),
            [VariableInfo("key", (12, 2, 8), "float32", True)],
            PlanRequest(
                MeshShape((1, 8), ("batch", "model")),
                policy="memory",
                strict=True,
            ),
            owner="ToyBackbone",
        )


KEY_DIMS = ("hidden", "kv_heads", "head_dim")
MESH_1x8 = {"batch": 1, "model": 8}


def toy_estimate(spec, axis_sizes=MESH_1x8, neighbours=(), **model):
    return estimate(
        (64, 2, 8),
        "float32",
        spec,
        KEY_DIMS,
        axis_sizes,
        ("batch",),
        CostModel(**{"tokens_per_step": 4, **model}),
        sharded_neighbours=neighbours,
    )


def test_cost_of_the_model_axis_on_the_hidden_input():
    # 4 tokens; out = 2 * 8 floats, in = 64 floats per token.
    cost = toy_estimate(("model", None, None))
    assert cost.collectives == {"all-reduce": 4 * 16 * 4, "all-gather": 1024}
    shard = 8 * 2 * 8 * 4
    assert cost.state_bytes == shard * 4  # weight, gradient, 2 moments
    assert cost.touched_bytes == shard * 10
    expected = 1e6 * ((2 * 256 + 1024) / 400e9 + shard * 10 / 3.2e12)
    assert cost.time_us == pytest.approx(expected)
    inference = toy_estimate(("model", None, None), training=False)
    assert inference.collectives == {"all-reduce": 256}
    assert inference.state_bytes == shard


def test_cost_of_replication_depends_on_the_neighbours():
    whole = 64 * 2 * 8 * 4
    # Neighbours sharded along 'model': the output gradient is a partial
    # sum, all-reduced (smaller than the weight's gradient here).
    assert toy_estimate(
        (None, None, None), neighbours={"model"}
    ).collectives == {"all-reduce": 256}
    # A layer with nothing on 'model': the activation layouts keep its
    # input and output whole, every device repeats it, nothing crosses.
    alone = toy_estimate((None, None, None))
    assert alone.collectives == {}
    assert alone.state_bytes == whole * 4


def test_cost_of_fsdp_on_the_batch_axis():
    mesh = {"batch": 2, "model": 4}
    cost = toy_estimate((("batch", "model"), None, None), axis_sizes=mesh)
    shard = 8 * 2 * 8 * 4
    # 'batch' splits the 4 tokens in 2 and shards the weight: gathered
    # forward and backward, its gradient scattered. 'model' on the hidden
    # input: all-reduce of the output (2 tokens x 16 floats), all-gather of
    # the input gradient (2 tokens x 64 floats).
    assert cost.collectives == {
        "all-gather": 2 * (2 * shard) + 2 * 64 * 4,
        "reduce-scatter": shard,
        "all-reduce": 2 * 16 * 4,
    }
    # Off the weight, 'batch' all-reduces its gradient.
    kept = toy_estimate((None, None, None), mesh, neighbours={"model"})
    assert kept.collectives == {"all-reduce": 64 * 2 * 8 * 4 + 2 * 16 * 4}


def test_plan_records_every_candidate_and_why():
    weight = key_kernel_plan("auto")
    assert [c.label for c in weight.candidates] == [
        "replicate along 'model'",
        "'model' on dim 0",
    ]
    assert [c.chosen for c in weight.candidates] == [True, False]
    assert weight.candidates[0].time_us < weight.candidates[1].time_us
    assert "policy 'auto' chose replicate along 'model'" in weight.reason
    assert "'model' on dim 0:" in weight.reason
    data = weight.to_dict()["candidates"]
    assert data[1]["spec"] == [["batch", "model"], None, None]
    assert set(data[0]) == {
        "spec",
        "label",
        "state_bytes",
        "touched_bytes",
        "collectives",
        "collective_bytes",
        "time_us",
        "chosen",
    }
    # A weight without a choice records none.
    assert key_kernel_plan("auto", mesh=(1, 2)).candidates == ()


def test_policies_minimize_their_own_measure():
    for policy in ("auto", "memory", "communication"):
        weight = key_kernel_plan(policy)
        chosen = next(c for c in weight.candidates if c.chosen)
        measure = {
            "auto": lambda c: c.time_us,
            "memory": lambda c: c.state_bytes,
            "communication": lambda c: (
                2 * c.collectives.get("all-reduce", 0)
                + c.collectives.get("all-gather", 0)
            ),
        }[policy]
        assert measure(chosen) == min(map(measure, weight.candidates))
    # Few tokens per step: moving costs little traffic and saves memory.
    assert key_kernel_plan("auto", tokens_per_step=1).decision == ALTERNATIVE


GPT2_LIKE = dict(
    vocabulary_size=2048,
    num_layers=2,
    num_heads=12,
    hidden_dim=384,
    intermediate_dim=1536,
    max_sequence_length=64,
)
GEMMA_LIKE = dict(
    vocabulary_size=2048,
    num_layers=2,
    num_query_heads=8,
    num_key_value_heads=1,
    hidden_dim=256,
    intermediate_dim=1024,
    head_dim=32,
)
QUERY = "transformer_layer_0/self_attention/query/kernel"


def test_auto_moves_gpt2_heads_at_128_tokens_and_replicates_at_512():
    # benchmarks/policy_costs.py measures both choices as the cheaper:
    # replicated, the attention is repeated on every device (no traffic);
    # moved, it saves memory but all-reduces q/k/v, worth it for few tokens.
    few = GPT2Backbone.plan_layout(
        MESH_1x8, config=GPT2_LIKE, tokens_per_step=128
    )
    assert few.weight(QUERY).spec == (("batch", "model"), None, None)
    assert few.weight(QUERY).decision == ALTERNATIVE
    many = GPT2Backbone.plan_layout(
        MESH_1x8, config=GPT2_LIKE, tokens_per_step=512
    )
    assert many.weight(QUERY).spec == ("batch", None, None)
    assert many.weight(QUERY).decision == FALLBACK
    default = GPT2Backbone.plan_layout(MESH_1x8, config=GPT2_LIKE)
    assert default.tokens_per_step == 16384
    assert default.weight(QUERY).spec == ("batch", None, None)
    assert estimate_plan(few).state_bytes < estimate_plan(many).state_bytes


@pytest.mark.parametrize("tokens_per_step", [512, 16384, 2**20])
def test_auto_keeps_a_single_kv_head_replicated(tokens_per_step):
    plan = GemmaBackbone.plan_layout(
        MESH_1x8, config=GEMMA_LIKE, tokens_per_step=tokens_per_step
    )
    key = plan.weight("decoder_block_0/attention/key/kernel")
    assert key.spec == (None, "batch", None)
    assert key.decision == FALLBACK
    assert [c.label for c in key.candidates] == [
        "replicate along 'model'",
        "'model' on dim 1 (hidden)",
    ]


@pytest.mark.parametrize("value", [0, -8, 1.5, True, "512"])
def test_tokens_per_step_must_be_a_positive_int(value):
    with pytest.raises(ValueError, match=f"tokens_per_step={value!r}"):
        GemmaBackbone.plan_layout(
            MESH_1x8, config=GEMMA_LIKE, tokens_per_step=value
        )
    with pytest.raises(ValueError, match="positive int"):
        GemmaBackbone.get_layout_map(make_mesh((1, 8)), tokens_per_step=value)


def test_cli_explains_each_choice_with_its_costs(capsys):
    args = ["plan", "gemma_2b_en", "--mesh", "1x8"]
    assert main(args) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "policy 'auto' chose replicate along 'model':" in text
    assert "over 'model' on dim 1 (hidden):" in text
    assert " us, " in text and "MB collectives" in text
    assert main([*args, "--tokens-per-step", "64", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["policy"] == "auto" and plan["tokens_per_step"] == 64
    key = next(
        w
        for w in plan["weights"]
        if w["path"] == "decoder_block_0/attention/key/kernel"
    )
    assert [c["label"] for c in key["candidates"]] == [
        "replicate along 'model'",
        "'model' on dim 1 (hidden)",
    ]
    assert sum(c["chosen"] for c in key["candidates"]) == 1
    assert main([*args, "--tokens-per-step", "0"]) == 2
    assert "tokens_per_step=0" in capsys.readouterr().err
