"""ALBERT layouts: every preset's plan on every mesh, and exact specs."""

import pytest

from keras_nlp.models.albert.albert_backbone import AlbertBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_encoder_preset_meets_goals
from tests.models.backbone_checks import mesh_dict

pytestmark = pytest.mark.multi_device

PRESETS = list(AlbertBackbone.presets)
BLOCK = "group_0_inner_layer_0/"
ATTENTION = BLOCK + "self_attention_layer/"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_meets_the_goals(preset, mesh_shape):
    plan = assert_encoder_preset_meets_goals(AlbertBackbone, preset, mesh_shape)
    # One shared block: its weights appear once.
    assert not any("inner_layer_1" in w.path for w in plan.weights)


def test_base_on_an_8_way_axis_shards_the_vocabulary_and_hidden():
    plan = AlbertBackbone.plan_layout(
        mesh_dict((1, 8)), preset="albert_base_en_uncased"
    )
    expected = {
        # 30000 = 16 x 1875: unlike BERT's 30522, the rows take the axis.
        "token_embedding/embeddings": ("model", "batch"),
        "position_embedding/embeddings": ("model", "batch"),
        "segment_embedding/embeddings": (None, None),
        # (128, 768): the hidden output on the model axis.
        "embedding_projection/kernel": ("batch", "model"),
        # 12 heads on 8 devices: hidden instead, a head is never split.
        ATTENTION + "query/kernel": (("batch", "model"), None, None),
        ATTENTION + "value/kernel": (("batch", "model"), None, None),
        ATTENTION + "attention_output/kernel": (None, None, ("batch", "model")),
        ATTENTION + "query/bias": (None, None),
        BLOCK + "feedforward_intermediate_dense/kernel": ("batch", "model"),
        BLOCK + "feedforward_output_dense/kernel": ("model", "batch"),
        "pooled_dense/kernel": ("batch", "model"),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    assert plan.weight("token_embedding/embeddings").decision == "sharded"
    query = plan.weight(ATTENTION + "query/kernel")
    assert query.decision == "alternative"
    assert "heads, size 12" in query.reason
    # The shared block's three head biases, nothing else.
    assert sorted(w.path for w in plan.fallbacks) == [
        ATTENTION + f"{name}/bias" for name in ("key", "query", "value")
    ]


def test_extra_extra_large_on_a_2x4_mesh_shards_heads():
    plan = AlbertBackbone.plan_layout(
        mesh_dict((2, 4)), preset="albert_extra_extra_large_en_uncased"
    )
    assert not plan.fallbacks
    assert plan.weight(ATTENTION + "query/kernel").spec == (
        "batch",
        "model",
        None,
    )
    assert plan.weight(ATTENTION + "query/bias").spec == ("model", None)
