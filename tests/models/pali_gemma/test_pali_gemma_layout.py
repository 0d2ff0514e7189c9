"""PaliGemma layouts: every preset's plan on every mesh, and exact specs."""

import re

import pytest

from keras_nlp.models.pali_gemma import PaliGemmaBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict
from tests.models.tiny_configs import tiny

pytestmark = pytest.mark.multi_device

PRESETS = list(PaliGemmaBackbone.presets)
VISION = "image_encoder/encoder_block_26/"
TEXT = "decoder_block_17/"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_is_efficient(preset, mesh_shape):
    plan = assert_preset_plan_is_efficient(
        PaliGemmaBackbone, preset, mesh_shape
    )
    # Every model axis divides the vision tower's 16 heads and Gemma's
    # query heads; undividable key/value heads take the hidden alternative.
    assert not plan.fallbacks, [w.path for w in plan.fallbacks]
    assert plan.memory_ratio <= 1.005, plan.memory_ratio


def test_3b_on_an_8_way_axis_shards_the_vision_tower_like_the_text():
    plan = PaliGemmaBackbone.plan_layout(
        mesh_dict((1, 8)), preset="pali_gemma_3b_224"
    )
    attention = VISION + "multi_head_attention/"
    expected = {
        # The patch conv's output width on the model axis.
        "image_encoder/encoder_embeddings/embedding_conv/kernel": (
            None,
            None,
            None,
            "model",
        ),
        # 256 positions, like a text position table.
        "image_encoder/encoder_embeddings/position_embedding/embeddings": (
            "model",
            "batch",
        ),
        # 16 flat heads of 72 on the model axis (2 per device), hidden on
        # the data axis; the output projection transposed.
        attention + "query_proj/kernel": ("batch", "model"),
        attention + "query_proj/bias": ("model",),
        attention + "value_proj/kernel": ("batch", "model"),
        attention + "out_proj/kernel": ("model", "batch"),
        attention + "out_proj/bias": (None,),
        VISION + "mlp_dense_1/kernel": ("batch", "model"),
        VISION + "mlp_dense_1/bias": ("model",),
        VISION + "mlp_dense_2/kernel": ("model", "batch"),
        VISION + "layer_norm_1/gamma": (None,),
        # The projection into the text: text hidden on the model axis.
        "image_classifier/kernel": ("batch", "model"),
        # 257152 = 2^7 x 2009 rows.
        "token_embedding/embeddings": ("model", "batch"),
        # Gemma's 8 query heads; its one key/value head cannot be split,
        # so hidden takes both axes.
        TEXT + "attention/query/kernel": ("model", "batch", None),
        TEXT + "attention/key/kernel": (None, ("batch", "model"), None),
        TEXT + "attention/attention_output/kernel": ("model", None, "batch"),
        TEXT + "ffw_gating/kernel": ("batch", "model"),
        TEXT + "ffw_linear/kernel": ("model", "batch"),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    key = plan.weight(TEXT + "attention/key/kernel")
    assert key.decision == "alternative"
    assert "kv_heads, size 1" in key.reason


def test_each_path_matches_one_rule_of_its_own_tower():
    _, config = tiny("PaliGemmaBackbone")
    backbone = PaliGemmaBackbone(**config)
    rules = PaliGemmaBackbone._layout_rules(config)
    for variable in backbone.weights:
        matches = [r[0] for r in rules if re.fullmatch(r[0], variable.path)]
        assert len(matches) <= 1, (variable.path, matches)
        if len(variable.shape) > 1:
            assert matches, variable.path
        vision = variable.path.startswith("image_")
        assert all(m.startswith("image_") == vision for m in matches)
