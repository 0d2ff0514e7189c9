"""Mixtral plans for the preset and tiny configs' experts."""

import pytest

from keras_nlp.models.mixtral.mixtral_backbone import MixtralBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict
from tests.models.tiny_configs import tiny_configs

pytestmark = pytest.mark.multi_device

PRESETS = list(MixtralBackbone.presets)
MOE = "transformer_layer_0/mixtral_sparse_moe_block/"
EXPERTS = MOE + "experts/expert_feedforward_"
# mixtral_8_7b_en: 8 experts (top 2), 32:8 heads, vocabulary 32000.
# The tiny configs (tests/models/tiny_configs.py) are sharded on every mesh
# by tests/models/test_conformance.py;
# "e8_top2_gqa_32_8" has the preset's expert and head counts, and in
# "e3_top1_gqa_8_2_window" 3 experts divide no model axis.
TINY = tiny_configs("MixtralBackbone")
EXPERT_CONFIGS = ["e8_top2_gqa_32_8", "e3_top1_gqa_8_2_window"]


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_plans_efficiently(preset, mesh_shape):
    plan = assert_preset_plan_is_efficient(MixtralBackbone, preset, mesh_shape)
    # 8 experts, 32 and 8 heads and the vocabulary divide every axis.
    assert plan.fallbacks == ()
    assert plan.memory_ratio <= 1.02
    experts = plan.weight(EXPERTS + "gate_dense")
    assert experts.decision == "sharded"
    assert experts.shard_shape == (
        8 // mesh_shape[1],
        4096 // mesh_shape[0],
        14336,
    )


def test_preset_specs_on_a_2x4_mesh():
    plan = MixtralBackbone.plan_layout(
        mesh_dict((2, 4)), preset="mixtral_8_7b_en"
    )
    expected = {
        "token_embedding/embeddings": ("model", "batch"),
        "token_embedding/reverse_embeddings": ("batch", "model"),
        "transformer_layer_0/self_attention/query/kernel": (
            "batch",
            "model",
            None,
        ),
        "transformer_layer_0/self_attention/key/kernel": (
            "batch",
            "model",
            None,
        ),
        MOE + "sparse_feedforward_gate_dense/kernel": (None, None),
        EXPERTS + "gate_dense": ("model", "batch", None),
        EXPERTS + "intermediate_dense": ("model", "batch", None),
        EXPERTS + "output_dense": ("model", None, "batch"),
        "transformer_layer_0/feedforward_layernorm/scale": (None,),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    router = plan.weight(MOE + "sparse_feedforward_gate_dense/kernel")
    assert router.decision == "replicated"
    assert plan.weight(EXPERTS + "output_dense").shard_shape == (
        2,
        14336,
        2048,
    )


@pytest.mark.parametrize(
    "config",
    [
        dict(preset="mixtral_8_7b_en"),
        dict(config=TINY["e8_top2_gqa_32_8"]),
    ],
    ids=["preset", "tiny"],
)
def test_experts_that_do_not_divide_shard_their_ffw_dimension(config):
    plan = MixtralBackbone.plan_layout({"batch": 1, "model": 16}, **config)
    reason = "dim 0 (experts, size 8) is not divisible by 'model' (size 16)"
    for name, spec in [
        ("gate_dense", (None, "batch", "model")),
        ("intermediate_dense", (None, "batch", "model")),
        ("output_dense", (None, "model", "batch")),
    ]:
        weight = plan.weight(EXPERTS + name)
        assert weight.spec == spec, name
        assert weight.decision == "alternative", name
        assert reason in weight.reason
    # Only the 8 key/value heads fall back (replicated along 'model').
    assert {w.path.rsplit("/", 2)[-2] for w in plan.fallbacks} == {
        "key",
        "value",
    }


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("name", EXPERT_CONFIGS)
def test_experts_shard_their_ffw_dimension_when_they_do_not_divide(
    name, mesh_shape
):
    plan = MixtralBackbone.plan_layout(mesh_dict(mesh_shape), config=TINY[name])
    experts = plan.weight(EXPERTS + "gate_dense")
    divides = TINY[name]["num_experts"] % mesh_shape[1] == 0
    assert experts.decision == ("sharded" if divides else "alternative")
    assert plan.weight(EXPERTS + "output_dense").fallbacks == ()
