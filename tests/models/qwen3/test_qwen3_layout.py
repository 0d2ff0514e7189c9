"""Qwen3Backbone plans for every preset and tiny configs' heads."""

import pytest

from keras_nlp.models.qwen3.qwen3_backbone import Qwen3Backbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict
from tests.models.tiny_configs import tiny_configs

pytestmark = pytest.mark.multi_device

ATTENTION = "transformer_layer_0/self_attention/"
# The tiny configs (tests/models/tiny_configs.py) are sharded on every mesh
# by tests/models/test_conformance.py;
# these two keep qwen3_0.6b_en's 16:8 heads (tied, head_dim * heads = 2 *
# hidden_dim) and qwen3_8b_en's 32:8 (untied, head_dim * heads = hidden).
TINY = tiny_configs("Qwen3Backbone")
HEAD_CONFIGS = ["gqa_16_8_tied", "gqa_32_8_untied_window"]


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", list(Qwen3Backbone.presets))
def test_every_preset_plans_efficiently(preset, mesh_shape):
    plan = assert_preset_plan_is_efficient(Qwen3Backbone, preset, mesh_shape)
    # 16 or 32 query heads and 8 key/value heads divide every model axis.
    assert plan.fallbacks == ()
    assert plan.memory_ratio <= 1.02


def test_qwen3_0_6b_specs_on_a_1x8_mesh():
    plan = Qwen3Backbone.plan_layout(mesh_dict((1, 8)), preset="qwen3_0.6b_en")
    expected = {
        "token_embedding/embeddings": ("model", "batch"),
        ATTENTION + "query/kernel": ("batch", "model", None),
        ATTENTION + "key/kernel": ("batch", "model", None),
        ATTENTION + "value/kernel": ("batch", "model", None),
        ATTENTION + "attention_output/kernel": ("model", None, "batch"),
        ATTENTION + "query_dense_layernorm/scale": (None,),
        ATTENTION + "key_dense_layernorm/scale": (None,),
        "transformer_layer_0/feedforward_intermediate_dense/kernel": (
            "batch",
            "model",
        ),
        "transformer_layer_0/feedforward_output_dense/kernel": (
            "model",
            "batch",
        ),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    # One key/value head per device; heads are never split.
    assert plan.weight(ATTENTION + "key/kernel").shard_shape == (1024, 1, 128)
    assert plan.weight(ATTENTION + "query/kernel").shard_shape == (
        1024,
        2,
        128,
    )


def test_qwen3_8b_kv_heads_replicate_on_a_wider_model_axis():
    plan = Qwen3Backbone.plan_layout(
        {"batch": 1, "model": 16}, preset="qwen3_8b_en"
    )
    key = plan.weight(ATTENTION + "key/kernel")
    assert key.spec == ("batch", None, None)
    assert key.reason.startswith(
        "dim 1 (kv_heads, size 8) is not divisible by 'model' (size 16)"
    )
    assert plan.weight(ATTENTION + "query/kernel").spec == (
        "batch",
        "model",
        None,
    )
    assert plan.weight("token_embedding/reverse_embeddings").spec == (
        "batch",
        "model",
    )


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("name", HEAD_CONFIGS)
def test_tiny_configs_with_the_presets_heads_never_fall_back(name, mesh_shape):
    config = TINY[name]
    plan = Qwen3Backbone.plan_layout(mesh_dict(mesh_shape), config=config)
    assert plan.fallbacks == ()
    tied = config.get("tie_word_embeddings", True)
    paths = {w.path for w in plan.weights}
    assert ("token_embedding/reverse_embeddings" in paths) == (not tied)
