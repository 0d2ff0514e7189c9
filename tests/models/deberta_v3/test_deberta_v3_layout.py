"""DeBERTaV3 layouts: every preset's plan on every mesh, and exact specs."""

import pytest

from keras_nlp.models.deberta_v3.deberta_v3_backbone import DebertaV3Backbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_encoder_preset_meets_goals
from tests.models.backbone_checks import mesh_dict

pytestmark = pytest.mark.multi_device

PRESETS = list(DebertaV3Backbone.presets)
BLOCK = "disentangled_attention_encoder_layer_1/"
ATTENTION = BLOCK + "self_attention_layer/"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_meets_the_goals(preset, mesh_shape):
    plan = assert_encoder_preset_meets_goals(
        DebertaV3Backbone, preset, mesh_shape
    )
    for weight in plan.weights:
        if weight.path.endswith("attention_output/kernel"):
            # Its first dimension is heads * head_dim: the model axis
            # there could cut a head.
            assert "model" not in str(weight.spec[0]), weight.path


def test_base_on_an_8_way_axis_never_splits_a_head():
    plan = DebertaV3Backbone.plan_layout(
        mesh_dict((1, 8)), preset="deberta_v3_base_en"
    )
    expected = {
        # 128100 = 4 x 32025: the hidden dimension takes the model axis.
        "token_embedding/embeddings": ("batch", "model"),
        "rel_embedding/rel_embedding": ("model", "batch"),
        # 12 heads on 8 devices: hidden instead, a head is never split.
        ATTENTION + "query/kernel": (("batch", "model"), None, None),
        ATTENTION + "key/kernel": (("batch", "model"), None, None),
        ATTENTION + "value/kernel": (("batch", "model"), None, None),
        ATTENTION + "query/bias": (None, None),
        # 768 = 12 x 64 divides by 8, but 12 heads do not: the model axis
        # goes on the output's hidden dimension, never on heads * head_dim.
        ATTENTION + "attention_output/kernel": ("batch", "model"),
        BLOCK + "feedforward_intermediate_dense/kernel": ("batch", "model"),
        BLOCK + "feedforward_output_dense/kernel": ("model", "batch"),
        BLOCK + "self_attention_layer_norm/gamma": (None,),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    query = plan.weight(ATTENTION + "query/kernel")
    assert query.decision == "alternative"
    assert "heads, size 12" in query.reason


def test_large_on_a_2x4_mesh_shards_heads():
    plan = DebertaV3Backbone.plan_layout(
        mesh_dict((2, 4)), preset="deberta_v3_large_en"
    )
    assert not plan.fallbacks
    assert plan.weight(ATTENTION + "query/kernel").spec == (
        "batch",
        "model",
        None,
    )
    assert plan.weight(ATTENTION + "query/bias").spec == ("model", None)
    assert plan.weight(ATTENTION + "attention_output/kernel").spec == (
        "batch",
        "model",
    )
