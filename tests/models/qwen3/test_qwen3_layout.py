"""Qwen3Backbone plans for every preset and sharded tiny builds."""

import pytest

from keras_nlp.models.qwen3.qwen3_backbone import Qwen3Backbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import assert_sharded_build_matches_plan
from tests.models.backbone_checks import mesh_dict

pytestmark = pytest.mark.multi_device

ATTENTION = "transformer_layer_0/self_attention/"
_TINY = dict(num_layers=1, intermediate_dim=96, vocabulary_size=256)
TINY = {
    # qwen3_0.6b_en: 16:8, tied, head_dim * heads = 2 * hidden_dim.
    "gqa_16_8_tied": dict(
        _TINY,
        num_query_heads=16,
        num_key_value_heads=8,
        head_dim=8,
        hidden_dim=64,
    ),
    # qwen3_8b_en: 32:8, untied, head_dim * heads = hidden_dim.
    "gqa_32_8_untied": dict(
        _TINY,
        num_query_heads=32,
        num_key_value_heads=8,
        head_dim=2,
        hidden_dim=64,
        tie_word_embeddings=False,
    ),
}


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
@pytest.mark.parametrize("name", list(TINY))
def test_tiny_configs_shard_as_planned(name, mesh_shape):
    config = TINY[name]
    plan = assert_sharded_build_matches_plan(Qwen3Backbone, config, mesh_shape)
    assert plan.fallbacks == ()
    tied = config.get("tie_word_embeddings", True)
    paths = {w.path for w in plan.weights}
    assert ("token_embedding/reverse_embeddings" in paths) == (not tied)
