"""QwenBackbone plans for every preset and tiny configs' fallbacks."""

import pytest

from keras_nlp.models.qwen.qwen_backbone import QwenBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict
from tests.models.tiny_configs import tiny_configs

pytestmark = pytest.mark.multi_device

ATTENTION = "transformer_layer_0/self_attention/"
# Weights whose heads (query) or key/value heads fall back.
QUERY_WEIGHTS = ("query/kernel", "query/bias", "attention_output/kernel")
KV_WEIGHTS = ("key/kernel", "key/bias", "value/kernel", "value/bias")

# The tiny configs (tests/models/tiny_configs.py) are sharded on every mesh
# by tests/models/test_conformance.py;
# these three keep the presets' head ratios: qwen2.5_0.5b_en's 14:2 (14
# query heads divide only model 1 and 2), qwen2.5_3b_en's 16:2 and
# qwen2.5_7b_en's 28:4, untied (28 and 4 do not divide model 8).
TINY = tiny_configs("QwenBackbone")
HEAD_CONFIGS = ["gqa_14_2_tied", "gqa_16_2_tied", "gqa_28_4_untied_window"]


def expected_fallbacks(num_query_heads, num_key_value_heads, model):
    """Attention weights whose heads the model axis does not divide."""
    names = []
    if num_query_heads % model:
        names += QUERY_WEIGHTS
    if num_key_value_heads % model:
        names += KV_WEIGHTS
    return sorted(names)


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", list(QwenBackbone.presets))
def test_every_preset_plans_efficiently(preset, mesh_shape):
    plan = assert_preset_plan_is_efficient(QwenBackbone, preset, mesh_shape)
    config = QwenBackbone.presets[preset]
    model = mesh_shape[1]
    # Only attention weights with atomic heads fall back, and their
    # reasons name the heads.
    fallen = sorted(
        w.path[len(ATTENTION) :]
        for w in plan.fallbacks
        if w.path.startswith(ATTENTION)
    )
    assert fallen == expected_fallbacks(
        config["num_query_heads"], config["num_key_value_heads"], model
    )
    assert len(plan.fallbacks) == len(fallen) * config["num_layers"]
    for weight in plan.fallbacks:
        kind = "kv_heads" if "/key/" in weight.path else "heads"
        kind = "kv_heads" if "/value/" in weight.path else kind
        assert weight.reason.startswith("dim "), weight.reason
        assert f"({kind}, size " in weight.reason, weight.reason
    if not plan.fallbacks:
        assert plan.memory_ratio <= 1.02


def test_qwen2_5_0_5b_specs_on_a_1x8_mesh():
    plan = QwenBackbone.plan_layout(mesh_dict((1, 8)), preset="qwen2.5_0.5b_en")
    expected = {
        # 151936 = 8 * 18992: the vocabulary goes on the model axis.
        "token_embedding/embeddings": ("model", "batch"),
        # 14 query heads and 2 key/value heads: replicated along 'model'.
        ATTENTION + "query/kernel": ("batch", None, None),
        ATTENTION + "query/bias": (None, None),
        ATTENTION + "key/kernel": ("batch", None, None),
        ATTENTION + "value/bias": (None, None),
        ATTENTION + "attention_output/kernel": (None, None, "batch"),
        "transformer_layer_0/feedforward_gate_dense/kernel": (
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
    query = plan.weight(ATTENTION + "query/kernel")
    assert query.reason.startswith(
        "dim 1 (heads, size 14) is not divisible by 'model' (size 8)"
    )
    key = plan.weight(ATTENTION + "key/kernel")
    assert key.reason.startswith(
        "dim 1 (kv_heads, size 2) is not divisible by 'model' (size 8)"
    )
    bias = plan.weight(ATTENTION + "query/bias")
    assert bias.reason.startswith(
        "dim 0 (heads, size 14) is not divisible by 'model' (size 8)"
    )


def test_qwen2_5_7b_specs_on_a_2x4_mesh():
    # 28 query and 4 key/value heads divide a model axis of 4: no fallback.
    plan = QwenBackbone.plan_layout(mesh_dict((2, 4)), preset="qwen2.5_7b_en")
    expected = {
        "token_embedding/embeddings": ("model", "batch"),
        "token_embedding/reverse_embeddings": ("batch", "model"),
        ATTENTION + "query/kernel": ("batch", "model", None),
        ATTENTION + "query/bias": ("model", None),
        ATTENTION + "key/kernel": ("batch", "model", None),
        ATTENTION + "key/bias": ("model", None),
        ATTENTION + "attention_output/kernel": ("model", None, "batch"),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    assert plan.weight(ATTENTION + "query/kernel").shard_shape == (1792, 7, 128)
    assert plan.fallbacks == ()


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("name", HEAD_CONFIGS)
def test_tiny_configs_fall_back_only_on_atomic_heads(name, mesh_shape):
    config = TINY[name]
    plan = QwenBackbone.plan_layout(mesh_dict(mesh_shape), config=config)
    tied = config.get("tie_word_embeddings", True)
    paths = {w.path for w in plan.weights}
    assert ("token_embedding/reverse_embeddings" in paths) == (not tied)
    # Only heads fall back, as in the presets.
    assert all("heads, size" in w.reason for w in plan.fallbacks)
    heads = sorted(w.path[len(ATTENTION) :] for w in plan.fallbacks)
    assert heads == expected_fallbacks(
        config["num_query_heads"], config["num_key_value_heads"], mesh_shape[1]
    )
