"""Phi-3 layouts: full-size preset plans and a tiny config's fallbacks."""

import pytest

from keras_nlp.models.phi3.phi3_backbone import Phi3Backbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict
from tests.models.tiny_configs import tiny_configs

pytestmark = pytest.mark.multi_device

PRESETS = list(Phi3Backbone.presets)
ATTENTION = "transformer_layer_0/attention/"
# The tiny configs (tests/models/tiny_configs.py) are sharded on every mesh
# by tests/models/test_conformance.py; "mha_4_4_su_odd_vocab" has Su RoPE,
# an odd vocabulary and 4 heads that an 8-way axis can't split.
TINY = tiny_configs("Phi3Backbone")


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_is_efficient(preset, mesh_shape):
    plan = assert_preset_plan_is_efficient(Phi3Backbone, preset, mesh_shape)
    # 32 heads, 3072, 8192 and 32064 all divide every axis here.
    assert plan.fallbacks == ()
    assert plan.memory_ratio <= 1.02


def test_phi3_mini_specs_on_a_2x4_mesh():
    plan = Phi3Backbone.plan_layout(
        mesh_dict((2, 4)), preset="phi3_mini_4k_instruct_en"
    )
    block = "transformer_layer_31/"
    expected = {
        "token_embedding/embeddings": ("model", "batch"),
        "token_embedding/reverse_embeddings": ("batch", "model"),
        block + "attention/query/kernel": ("batch", "model", None),
        block + "attention/key/kernel": ("batch", "model", None),
        block + "attention/value/kernel": ("batch", "model", None),
        block + "attention/attention_output/kernel": ("model", None, "batch"),
        block + "feedforward_gate_dense/kernel": ("batch", "model"),
        block + "feedforward_intermediate_dense/kernel": ("batch", "model"),
        block + "feedforward_output_dense/kernel": ("model", "batch"),
        block + "pre_attention_layernorm/scale": (None,),
        block + "post_attention_layernorm/scale": (None,),
        "sequence_output_layernorm/scale": (None,),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    assert plan.weight(block + "attention/key/kernel").shard_shape == (
        1536,
        8,
        96,
    )


def test_heads_that_do_not_divide_are_replicated_with_a_reason():
    # 32 heads on a 64-way model axis: the kernels keep only the data axis.
    plan = Phi3Backbone.plan_layout(
        {"batch": 1, "model": 64}, preset="phi3_mini_4k_instruct_en"
    )
    key = plan.weight("transformer_layer_0/attention/key/kernel")
    assert key.spec == ("batch", None, None)
    assert key.reason.startswith(
        "dim 1 (kv_heads, size 32) is not divisible by 'model' (size 64)"
    )
    query = plan.weight("transformer_layer_0/attention/query/kernel")
    assert "dim 1 (heads, size 32)" in query.reason
    # 32064 = 64 * 501: the vocabulary still takes the model axis.
    embedding = plan.weight("token_embedding/embeddings")
    assert embedding.spec == ("model", "batch")


def test_tiny_odd_vocabulary_and_four_heads_on_eight_devices():
    config = TINY["mha_4_4_su_odd_vocab"]
    plan = Phi3Backbone.plan_layout(mesh_dict((1, 8)), config=config)
    # The odd vocabulary leaves the model axis to the hidden dimension.
    assert plan.weight("token_embedding/embeddings").spec == (
        "batch",
        "model",
    )
    assert plan.weight("token_embedding/reverse_embeddings").spec == (
        "model",
        "batch",
    )
    output = plan.weight(ATTENTION + "attention_output/kernel")
    assert output.spec == (None, None, "batch")
    assert "dim 0 (heads, size 4)" in output.reason
    assert {w.path for w in plan.fallbacks} == {
        ATTENTION + f"{name}/kernel"
        for name in ("query", "key", "value", "attention_output")
    }
