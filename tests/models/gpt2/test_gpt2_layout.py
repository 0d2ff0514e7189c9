"""GPT-2 layouts: full-size preset plans and tiny configs' fallbacks."""

import pytest

from keras_nlp.models.gpt2.gpt2_backbone import GPT2Backbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict
from tests.models.tiny_configs import tiny_configs

pytestmark = pytest.mark.multi_device

PRESETS = list(GPT2Backbone.presets)
# The tiny configs (tests/models/tiny_configs.py) are sharded on every mesh
# by tests/models/test_conformance.py. Multi-head attention throughout, with
# GPT-2's odd vocabulary: 8 heads divide every model axis (like medium's
# 16); 5 divide none (like extra large's 25; base's 12 and large's 20 fail
# only on 8).
TINY = tiny_configs("GPT2Backbone")
HEAD_CONFIGS = ["odd_vocab_8_heads", "odd_vocab_5_heads"]
BLOCK = "transformer_layer_3/"
ATTENTION = BLOCK + "self_attention/"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_is_efficient(preset, mesh_shape):
    plan = assert_preset_plan_is_efficient(GPT2Backbone, preset, mesh_shape)
    num_heads = GPT2Backbone.presets[preset]["num_heads"]
    if num_heads % mesh_shape[1] == 0:
        # The vocabulary has alternatives for every mesh; nothing else
        # falls back.
        assert not plan.fallbacks
        assert plan.memory_ratio <= 1.02
    else:
        # Only atomic heads: q/k/v kernels and biases and the output
        # kernel of every block.
        for weight in plan.fallbacks:
            assert "/self_attention/" in weight.path
            assert f"heads, size {num_heads})" in weight.reason
        assert (
            len(plan.fallbacks)
            == 7 * GPT2Backbone.presets[preset]["num_layers"]
        )


def test_extra_large_exact_specs():
    # 25 heads on a model axis of 4: heads stay whole (replicated along
    # 'model'), hidden stays on 'batch'.
    plan = GPT2Backbone.plan_layout(
        mesh_dict((2, 4)), preset="gpt2_extra_large_en"
    )
    expected = {
        # 50257 divides neither axis: hidden goes over both.
        "token_embedding/embeddings": (None, ("batch", "model")),
        "position_embedding/embeddings": ("model", "batch"),
        ATTENTION + "query/kernel": ("batch", None, None),
        ATTENTION + "key/kernel": ("batch", None, None),
        # Biases keep head_dim on 'batch' (FSDP-style).
        ATTENTION + "query/bias": (None, None),
        ATTENTION + "attention_output/kernel": (None, None, "batch"),
        ATTENTION + "attention_output/bias": (None,),
        BLOCK + "feedforward_intermediate_dense/kernel": ("batch", "model"),
        BLOCK + "feedforward_output_dense/kernel": ("model", "batch"),
        BLOCK + "self_attention_layer_norm/gamma": (None,),
        "layer_norm/beta": (None,),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    query = plan.weight(ATTENTION + "query/kernel")
    assert query.decision == "fallback"
    assert (
        "dim 1 (heads, size 25) is not divisible by 'model' (size 4)"
        in query.reason
    )
    key = plan.weight(ATTENTION + "key/kernel")
    assert "dim 1 (kv_heads, size 25)" in key.reason
    embedding = plan.weight("token_embedding/embeddings")
    assert embedding.decision == "alternative"
    assert embedding.shard_shape == (50257, 200)


def test_medium_exact_specs():
    plan = GPT2Backbone.plan_layout(mesh_dict((2, 4)), preset="gpt2_medium_en")
    assert plan.weight(ATTENTION + "query/kernel").spec == (
        "batch",
        "model",
        None,
    )
    assert plan.weight(ATTENTION + "query/kernel").shard_shape == (512, 4, 64)
    assert plan.weight(ATTENTION + "value/bias").spec == ("model", None)
    assert plan.weight(ATTENTION + "attention_output/kernel").spec == (
        "model",
        None,
        "batch",
    )
    # On a model-only mesh the odd vocabulary puts hidden on 'model' (the
    # 'batch' axis has size 1).
    plan = GPT2Backbone.plan_layout(mesh_dict((1, 8)), preset="gpt2_medium_en")
    assert plan.weight("token_embedding/embeddings").spec == ("batch", "model")
    assert not plan.fallbacks


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("name", HEAD_CONFIGS)
def test_tiny_configs_fall_back_only_on_atomic_heads(name, mesh_shape):
    plan = GPT2Backbone.plan_layout(mesh_dict(mesh_shape), config=TINY[name])
    if TINY[name]["num_heads"] == 5 and mesh_shape[1] > 1:
        assert plan.fallbacks
        assert all("heads, size 5)" in w.reason for w in plan.fallbacks)
    else:
        assert not plan.fallbacks
