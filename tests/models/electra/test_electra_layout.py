"""ELECTRA layouts: every preset's plan on every mesh, and exact specs."""

import pytest

from keras_nlp.models.electra.electra_backbone import ElectraBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_encoder_preset_meets_goals
from tests.models.backbone_checks import mesh_dict

pytestmark = pytest.mark.multi_device

PRESETS = list(ElectraBackbone.presets)
BLOCK = "transformer_layer_1/"
ATTENTION = BLOCK + "self_attention_layer/"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_meets_the_goals(preset, mesh_shape):
    plan = assert_encoder_preset_meets_goals(
        ElectraBackbone, preset, mesh_shape
    )
    config = ElectraBackbone.presets[preset]
    projected = config["embedding_dim"] != config["hidden_dim"]
    paths = {w.path for w in plan.weights}
    assert ("embeddings_projection/kernel" in paths) == projected


def test_small_on_an_8_way_axis_shards_embedding_width_and_hidden():
    plan = ElectraBackbone.plan_layout(
        mesh_dict((1, 8)), preset="electra_small_discriminator_uncased_en"
    )
    expected = {
        # 30522 = 2 x 15261: the table's 128-wide embedding takes the axis.
        "token_embedding/embeddings": ("batch", "model"),
        "position_embedding/embeddings": ("model", "batch"),
        "segment_embedding/embeddings": (None, None),
        # (128, 256): the hidden output on the model axis.
        "embeddings_projection/kernel": ("batch", "model"),
        # 4 heads on 8 devices: hidden instead, a head is never split.
        ATTENTION + "query/kernel": (("batch", "model"), None, None),
        ATTENTION + "key/kernel": (("batch", "model"), None, None),
        ATTENTION + "attention_output/kernel": (None, None, ("batch", "model")),
        ATTENTION + "key/bias": (None, None),
        BLOCK + "feedforward_intermediate_dense/kernel": ("batch", "model"),
        BLOCK + "feedforward_output_dense/kernel": ("model", "batch"),
        "pooled_dense/kernel": ("batch", "model"),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    assert plan.weight("token_embedding/embeddings").decision == "alternative"
    key = plan.weight(ATTENTION + "key/kernel")
    assert key.decision == "alternative"
    assert "kv_heads, size 4" in key.reason


def test_small_on_a_4x2_mesh_shards_heads():
    plan = ElectraBackbone.plan_layout(
        mesh_dict((4, 2)), preset="electra_small_discriminator_uncased_en"
    )
    assert not plan.fallbacks
    assert plan.weight(ATTENTION + "query/kernel").spec == (
        "batch",
        "model",
        None,
    )
    # 30522 divides by the model axis's 2; 128 by the data axis's 4.
    assert plan.weight("token_embedding/embeddings").spec == (
        "model",
        "batch",
    )
