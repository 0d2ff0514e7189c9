"""QwenMoeBackbone plans: the preset, and the kinds of blocks a config has."""

import pytest

from keras_nlp.models.qwen_moe.qwen_moe_backbone import QwenMoeBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict
from tests.models.tiny_configs import tiny_configs

pytestmark = pytest.mark.multi_device

PRESET = "qwen1.5_moe_2.7b_en"
MOE = "transformer_layer_0/qwen_sparse_moe_block/"
EXPERTS = MOE + "experts/expert_feedforward_"
SHARED = MOE + "shared_expert_dense/feedforward_"
# The tiny configs (tests/models/tiny_configs.py) are sharded on every mesh
# by tests/models/test_conformance.py; "e60_top4_mha_16_16_dense_first" has
# the preset's 60 experts and a dense first block.
TINY = tiny_configs("QwenMoeBackbone")


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
def test_the_preset_plans_efficiently(mesh_shape):
    plan = assert_preset_plan_is_efficient(QwenMoeBackbone, PRESET, mesh_shape)
    # 16 heads and the vocabulary divide every axis; 60 experts divide the
    # model axes 2 and 4, and on 8 their width is sharded instead.
    assert plan.fallbacks == ()
    assert plan.memory_ratio <= 1.02


@pytest.mark.parametrize(
    "mesh_shape, experts_spec",
    [
        ((1, 8), (None, "batch", "model")),
        ((2, 4), ("model", "batch", None)),
    ],
    ids=str,
)
def test_preset_specs(mesh_shape, experts_spec):
    plan = QwenMoeBackbone.plan_layout(mesh_dict(mesh_shape), preset=PRESET)
    expected = {
        "transformer_layer_0/self_attention/query/kernel": (
            "batch",
            "model",
            None,
        ),
        "transformer_layer_0/self_attention/key/bias": ("model", None),
        MOE + "sparse_feedforward_gate_dense/kernel": (None, None),
        EXPERTS + "gate_dense": experts_spec,
        SHARED + "intermediate_dense/kernel": ("batch", "model"),
        SHARED + "gate_dense/kernel": ("batch", "model"),
        SHARED + "output_dense/kernel": ("model", "batch"),
        MOE + "shared_expert_gate_dense/kernel": (None, None),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    assert plan.weight(MOE + "shared_expert_gate_dense/kernel").decision == (
        "replicated"
    )


@pytest.mark.parametrize(
    "mlp_only_layers, kinds",
    [([0], {"dense", "sparse"}), ([0, 1], {"dense"}), ([], {"sparse"})],
)
def test_rules_cover_exactly_the_kinds_of_blocks_a_config_has(
    mlp_only_layers, kinds
):
    config = dict(
        TINY["e60_top4_mha_16_16_dense_first"], mlp_only_layers=mlp_only_layers
    )
    # A rule matching no variable would raise: the plan resolves.
    plan = QwenMoeBackbone.plan_layout(mesh_dict((1, 8)), config=config)
    paths = {w.path for w in plan.weights}
    dense = "transformer_layer_0/qwen_moe_mlp/feedforward_"
    assert ("sparse" in kinds) == any("sparse_moe_block" in p for p in paths)
    assert ("dense" in kinds) == any("qwen_moe_mlp" in p for p in paths)
    if "dense" in kinds:
        assert plan.weight(dense + "gate_dense/kernel").spec == (
            "batch",
            "model",
        )
        assert plan.weight(dense + "output_dense/kernel").spec == (
            "model",
            "batch",
        )
