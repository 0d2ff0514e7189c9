"""DistilBERT layouts: every preset's plan on every mesh, and exact specs."""

import pytest

from keras_nlp.models.distil_bert.distil_bert_backbone import DistilBertBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_encoder_preset_meets_goals
from tests.models.backbone_checks import mesh_dict

pytestmark = pytest.mark.multi_device

PRESETS = list(DistilBertBackbone.presets)
EMBEDDINGS = "token_and_position_embedding/"
BLOCK = "transformer_layer_5/"
ATTENTION = BLOCK + "self_attention_layer/"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_meets_the_goals(preset, mesh_shape):
    assert_encoder_preset_meets_goals(DistilBertBackbone, preset, mesh_shape)


def test_base_on_an_8_way_axis_shards_hidden_instead_of_heads():
    plan = DistilBertBackbone.plan_layout(
        mesh_dict((1, 8)), preset="distil_bert_base_en_uncased"
    )
    expected = {
        # 30522 = 2 x 15261: the hidden dimension takes the model axis.
        EMBEDDINGS + "token_embedding/embeddings": ("batch", "model"),
        EMBEDDINGS + "position_embedding/embeddings": ("model", "batch"),
        # 12 heads on 8 devices: hidden instead, a head is never split.
        ATTENTION + "query/kernel": (("batch", "model"), None, None),
        ATTENTION + "value/kernel": (("batch", "model"), None, None),
        ATTENTION + "attention_output/kernel": (None, None, ("batch", "model")),
        ATTENTION + "key/bias": (None, None),
        BLOCK + "feedforward_intermediate_dense/kernel": ("batch", "model"),
        BLOCK + "feedforward_output_dense/kernel": ("model", "batch"),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    query = plan.weight(ATTENTION + "query/kernel")
    assert query.decision == "alternative"
    assert "heads, size 12" in query.reason
