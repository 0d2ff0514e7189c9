"""Qwen3MoeBackbone plans for every preset and the presets' 4 KV heads."""

import pytest

from keras_nlp.models.qwen3_moe.qwen3_moe_backbone import Qwen3MoeBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict
from tests.models.tiny_configs import tiny_configs

pytestmark = pytest.mark.multi_device

ATTENTION = "transformer_layer_0/self_attention/"
MOE = "transformer_layer_0/qwen3_sparse_moe_block/"
EXPERTS = MOE + "experts/expert_feedforward_"
# The tiny configs (tests/models/tiny_configs.py) are sharded on every mesh
# by tests/models/test_conformance.py; "e16_top8_gqa_32_4_sparse_step_2"
# keeps the presets' 32:4 heads, with a dense first block.
TINY = tiny_configs("Qwen3MoeBackbone")


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", list(Qwen3MoeBackbone.presets))
def test_every_preset_plans_efficiently(preset, mesh_shape):
    plan = assert_preset_plan_is_efficient(Qwen3MoeBackbone, preset, mesh_shape)
    # 128 experts and 32 or 64 query heads divide every axis; the 4
    # key/value heads that an 8-way axis does not shard their hidden
    # dimension instead of falling back.
    assert plan.fallbacks == ()
    assert plan.memory_ratio <= 1.02


def test_30b_specs_on_a_1x8_mesh():
    plan = Qwen3MoeBackbone.plan_layout(
        mesh_dict((1, 8)), preset="qwen3_moe_30b_a3b_en"
    )
    expected = {
        ATTENTION + "query/kernel": ("batch", "model", None),
        ATTENTION + "key/kernel": (("batch", "model"), None, None),
        ATTENTION + "value/kernel": (("batch", "model"), None, None),
        ATTENTION + "attention_output/kernel": ("model", None, "batch"),
        MOE + "sparse_feedforward_gate_dense/kernel": (None, None),
        EXPERTS + "gate_dense": ("model", "batch", None),
        EXPERTS + "output_dense": ("model", None, "batch"),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    key = plan.weight(ATTENTION + "key/kernel")
    assert key.decision == "alternative"
    assert "(kv_heads, size 4) is not divisible by 'model' (size 8)" in (
        key.reason
    )
    assert key.shard_shape == (256, 4, 128)
    assert plan.weight(EXPERTS + "gate_dense").shard_shape == (16, 2048, 1536)


def test_dense_and_sparse_blocks_of_one_config_are_both_planned():
    config = TINY["e16_top8_gqa_32_4_sparse_step_2"]
    plan = Qwen3MoeBackbone.plan_layout(mesh_dict((2, 4)), config=config)
    dense = "transformer_layer_0/qwen3_moe_mlp/feedforward_"
    experts = "transformer_layer_1/qwen3_sparse_moe_block/experts/"
    assert plan.weight(dense + "gate_dense/kernel").spec == ("batch", "model")
    assert plan.weight(dense + "output_dense/kernel").spec == (
        "model",
        "batch",
    )
    assert plan.weight(experts + "expert_feedforward_gate_dense").spec == (
        "model",
        "batch",
        None,
    )
    # With every block dense, the sparse rules are left out (a rule that
    # matches nothing would raise).
    dense_only = dict(config, decoder_sparse_step=3)
    paths = {
        w.path
        for w in Qwen3MoeBackbone.plan_layout(
            mesh_dict((2, 4)), config=dense_only
        ).weights
    }
    assert not any("sparse_moe_block" in path for path in paths)
