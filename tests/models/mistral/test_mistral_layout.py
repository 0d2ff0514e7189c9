"""Mistral plans for every preset and tiny configs' key/value heads."""

import pytest

from keras_nlp.models.mistral.mistral_backbone import MistralBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict
from tests.models.tiny_configs import tiny_configs

pytestmark = pytest.mark.multi_device

PRESETS = list(MistralBackbone.presets)
# Both presets have 32 query and 8 key/value heads (4 per KV head) and a
# vocabulary divisible by 256 (32000, 32768). The tiny configs
# (tests/models/tiny_configs.py) are sharded on every mesh by
# tests/models/test_conformance.py; "gqa_8_2_no_window" keeps the 4:1 ratio
# with 2 key/value heads, which the model axes 4 and 8 do not divide.
TINY = tiny_configs("MistralBackbone")
ATTENTION = "transformer_layer_0/self_attention/"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_plans_efficiently(preset, mesh_shape):
    plan = assert_preset_plan_is_efficient(MistralBackbone, preset, mesh_shape)
    # 32 and 8 heads, the widths and both vocabularies divide every axis.
    assert plan.fallbacks == ()
    assert plan.memory_ratio <= 1.02


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_specs_on_a_2x4_mesh(preset):
    plan = MistralBackbone.plan_layout(mesh_dict((2, 4)), preset=preset)
    block = "transformer_layer_31/"
    expected = {
        "token_embedding/embeddings": ("model", "batch"),
        "token_embedding/reverse_embeddings": ("batch", "model"),
        ATTENTION + "query/kernel": ("batch", "model", None),
        ATTENTION + "key/kernel": ("batch", "model", None),
        ATTENTION + "value/kernel": ("batch", "model", None),
        ATTENTION + "attention_output/kernel": ("model", None, "batch"),
        block + "feedforward_gate_dense/kernel": ("batch", "model"),
        block + "feedforward_intermediate_dense/kernel": ("batch", "model"),
        block + "feedforward_output_dense/kernel": ("model", "batch"),
        block + "feedforward_layernorm/scale": (None,),
        "sequence_output_layernorm/scale": (None,),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    assert plan.weight(ATTENTION + "key/kernel").shard_shape == (2048, 2, 128)
    vocabulary = MistralBackbone.presets[preset]["vocabulary_size"]
    assert plan.weight("token_embedding/embeddings").shard_shape == (
        vocabulary // 4,
        2048,
    )


def test_kv_heads_that_do_not_divide_are_replicated_with_a_reason():
    plan = MistralBackbone.plan_layout(
        {"batch": 1, "model": 16}, preset="mistral_7b_en"
    )
    key = plan.weight(ATTENTION + "key/kernel")
    assert key.spec == ("batch", None, None)
    assert key.decision == "fallback"
    assert key.reason.startswith(
        "dim 1 (kv_heads, size 8) is not divisible by 'model' (size 16)"
    )
    assert plan.weight(ATTENTION + "query/kernel").spec == (
        "batch",
        "model",
        None,
    )


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("name", list(TINY))
def test_only_kv_heads_that_do_not_divide_fall_back(name, mesh_shape):
    plan = MistralBackbone.plan_layout(mesh_dict(mesh_shape), config=TINY[name])
    key = plan.weight(ATTENTION + "key/kernel")
    kv_heads = TINY[name]["num_key_value_heads"]
    assert (key.decision == "fallback") == (kv_heads % mesh_shape[1] != 0)
