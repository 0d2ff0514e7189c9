"""Llama and Llama 3 plans for every preset.

The tiny configs (tests/models/tiny_configs.py) are sharded on every mesh
by tests/models/test_conformance.py.
"""

import pytest

from keras_nlp.models.llama.llama_backbone import LlamaBackbone
from keras_nlp.models.llama3.llama3_backbone import Llama3Backbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict

pytestmark = pytest.mark.multi_device

PRESETS = [(LlamaBackbone, p) for p in LlamaBackbone.presets] + [
    (Llama3Backbone, p) for p in Llama3Backbone.presets
]


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize(
    "backbone_cls, preset", PRESETS, ids=[p for _, p in PRESETS]
)
def test_every_preset_plans_efficiently(backbone_cls, preset, mesh_shape):
    plan = assert_preset_plan_is_efficient(backbone_cls, preset, mesh_shape)
    # 32 and 24 query heads and 8 key/value heads divide every model axis.
    assert plan.fallbacks == ()
    assert plan.memory_ratio <= 1.02


def test_llama3_8b_specs_on_a_2x4_mesh():
    plan = Llama3Backbone.plan_layout(mesh_dict((2, 4)), preset="llama3_8b_en")
    block = "transformer_layer_0/"
    expected = {
        "token_embedding/embeddings": ("model", "batch"),
        "token_embedding/reverse_embeddings": ("batch", "model"),
        block + "self_attention/query/kernel": ("batch", "model", None),
        block + "self_attention/key/kernel": ("batch", "model", None),
        block + "self_attention/value/kernel": ("batch", "model", None),
        block + "self_attention/attention_output/kernel": (
            "model",
            None,
            "batch",
        ),
        block + "feedforward_gate_dense/kernel": ("batch", "model"),
        block + "feedforward_intermediate_dense/kernel": ("batch", "model"),
        block + "feedforward_output_dense/kernel": ("model", "batch"),
        block + "self_attention_layernorm/scale": (None,),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    # 8,030,261,248 over 8 devices; only the norms (rank 1) are whole.
    assert plan.params_per_device == 1_004_015_616


def test_kv_heads_that_do_not_divide_are_replicated_with_a_reason():
    plan = Llama3Backbone.plan_layout(
        {"batch": 1, "model": 16}, preset="llama3_8b_en"
    )
    key = plan.weight("transformer_layer_0/self_attention/key/kernel")
    assert key.spec == ("batch", None, None)
    assert key.reason.startswith(
        "dim 1 (kv_heads, size 8) is not divisible by 'model' (size 16)"
    )
    query = plan.weight("transformer_layer_0/self_attention/query/kernel")
    assert query.spec == ("batch", "model", None)
