"""BERT layouts: every preset's plan on every mesh, and exact specs."""

import pytest

from keras_nlp.models.bert.bert_backbone import BertBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_encoder_preset_meets_goals
from tests.models.backbone_checks import mesh_dict

pytestmark = pytest.mark.multi_device

PRESETS = list(BertBackbone.presets)
BLOCK = "transformer_layer_1/"
ATTENTION = BLOCK + "self_attention_layer/"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_meets_the_goals(preset, mesh_shape):
    assert_encoder_preset_meets_goals(BertBackbone, preset, mesh_shape)


def test_base_on_an_8_way_axis_shards_hidden_instead_of_heads():
    plan = BertBackbone.plan_layout(
        mesh_dict((1, 8)), preset="bert_base_en_uncased"
    )
    expected = {
        # 30522 = 2 x 15261: the hidden dimension takes the model axis.
        "token_embedding/embeddings": ("batch", "model"),
        "position_embedding/embeddings": ("model", "batch"),
        "segment_embedding/embeddings": (None, None),
        # 12 heads on 8 devices: hidden instead, a head is never split.
        ATTENTION + "query/kernel": (("batch", "model"), None, None),
        ATTENTION + "key/kernel": (("batch", "model"), None, None),
        ATTENTION + "attention_output/kernel": (None, None, ("batch", "model")),
        ATTENTION + "query/bias": (None, None),
        BLOCK + "feedforward_intermediate_dense/kernel": ("batch", "model"),
        BLOCK + "feedforward_output_dense/kernel": ("model", "batch"),
        BLOCK + "self_attention_layer_norm/gamma": (None,),
        "pooled_dense/kernel": ("batch", "model"),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    query = plan.weight(ATTENTION + "query/kernel")
    assert query.decision == "alternative"
    assert "heads, size 12" in query.reason
    assert plan.weight("segment_embedding/embeddings").decision == (
        "replicated"
    )


def test_large_on_a_2x4_mesh_shards_heads():
    plan = BertBackbone.plan_layout(
        mesh_dict((2, 4)), preset="bert_large_en_uncased"
    )
    assert not plan.fallbacks
    assert plan.weight(ATTENTION + "query/kernel").spec == (
        "batch",
        "model",
        None,
    )
    assert plan.weight(ATTENTION + "attention_output/kernel").spec == (
        "model",
        None,
        "batch",
    )
    # 30522 divides by the data axis's 2 but not by 4.
    assert plan.weight("token_embedding/embeddings").spec == (
        "batch",
        "model",
    )
