"""`policy="memory"`: an axis that does not divide its dimension moves to
another dimension its rule names instead of replicating the weight."""

import keras
import pytest

from keras_nlp.distribution import DATA
from keras_nlp.distribution import MODEL
from keras_nlp.distribution import LayoutError
from keras_nlp.distribution import MeshShape
from keras_nlp.distribution import VariableInfo
from keras_nlp.distribution import normalize_rules
from keras_nlp.distribution import resolve_layout
from keras_nlp.distribution.plan import ALTERNATIVE
from keras_nlp.distribution.plan import FALLBACK
from keras_nlp.models import GemmaBackbone
from keras_nlp.models import GPT2Backbone
from keras_nlp.models import QwenBackbone
from tests.models.backbone_checks import assert_outputs_close
from tests.models.backbone_checks import make_mesh
from tests.models.test_conformance import ATOL
from tests.models.test_conformance import assert_follows_plan
from tests.models.test_conformance import forward
from tests.models.test_conformance import reference


def key_kernel_plan(policy, hidden=64, mesh=(1, 8)):
    return resolve_layout(
        normalize_rules([("key", (DATA, MODEL, None))], "ToyBackbone"),
        [VariableInfo("key", (hidden, 2, 8), "float32", True)],
        MeshShape(mesh, ("batch", "model")),
        model_axis="model",
        data_axis="batch",
        owner="ToyBackbone",
        policy=policy,
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
        backbone = ref.backbone_cls(**ref.config)
    backbone.set_weights(ref.backbone.get_weights())
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
            MeshShape((1, 8), ("batch", "model")),
            model_axis="model",
            data_axis="batch",
            owner="ToyBackbone",
            policy="memory",
            strict=True,
        )
