"""RoBERTa layouts: every preset's plan on every mesh, and exact specs."""

import pytest

from keras_nlp.models.roberta.roberta_backbone import RobertaBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_encoder_preset_meets_goals
from tests.models.backbone_checks import mesh_dict

pytestmark = pytest.mark.multi_device

PRESETS = list(RobertaBackbone.presets)
TOKEN = "embeddings/token_embedding/embeddings"
POSITION = "embeddings/position_embedding/embeddings"
BLOCK = "transformer_layer_1/"
ATTENTION = BLOCK + "self_attention_layer/"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_meets_the_goals(preset, mesh_shape):
    assert_encoder_preset_meets_goals(RobertaBackbone, preset, mesh_shape)


def test_base_on_a_2x4_mesh_shards_the_odd_vocabulary_table_by_hidden():
    plan = RobertaBackbone.plan_layout(
        mesh_dict((2, 4)), preset="roberta_base_en"
    )
    assert not plan.fallbacks
    expected = {
        # 50265 is odd: neither axis divides the rows, so the hidden
        # dimension takes both (768 / 8 per device).
        TOKEN: (None, ("batch", "model")),
        POSITION: ("model", "batch"),
        # 12 heads divide by 4: heads on the model axis.
        ATTENTION + "query/kernel": ("batch", "model", None),
        ATTENTION + "value/bias": ("model", None),
        ATTENTION + "attention_output/kernel": ("model", None, "batch"),
        BLOCK + "feedforward_intermediate_dense/kernel": ("batch", "model"),
        BLOCK + "feedforward_output_dense/kernel": ("model", "batch"),
        BLOCK + "feedforward_layer_norm/gamma": (None,),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    token = plan.weight(TOKEN)
    assert token.decision == "alternative"
    assert token.shard_shape == (50265, 96)
    assert not [w for w in plan.weights if "segment" in w.path]
    assert not [w for w in plan.weights if "pooled" in w.path]
