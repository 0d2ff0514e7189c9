"""XLM-RoBERTa layouts: every preset's plan on every mesh, exact specs."""

import pytest

from keras_nlp.models.xlm_roberta.xlm_roberta_backbone import XLMRobertaBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_encoder_preset_meets_goals
from tests.models.backbone_checks import mesh_dict

pytestmark = pytest.mark.multi_device

PRESETS = list(XLMRobertaBackbone.presets)
TOKEN = "embeddings/token_embedding/embeddings"
ATTENTION = "transformer_layer_1/self_attention_layer/"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_meets_the_goals(preset, mesh_shape):
    assert_encoder_preset_meets_goals(XLMRobertaBackbone, preset, mesh_shape)


# 250002 = 2 x 125001: the rows go on whichever axis has size 2.
@pytest.mark.parametrize(
    "mesh_shape, token_spec, shard_shape",
    [
        ((4, 2), ("model", "batch"), (125001, 256)),
        ((2, 4), ("batch", "model"), (125001, 256)),
    ],
    ids=str,
)
def test_large_puts_the_vocabulary_on_the_2_way_axis(
    mesh_shape, token_spec, shard_shape
):
    plan = XLMRobertaBackbone.plan_layout(
        mesh_dict(mesh_shape), preset="xlm_roberta_large_multi"
    )
    assert not plan.fallbacks
    token = plan.weight(TOKEN)
    assert (token.spec, token.shard_shape) == (token_spec, shard_shape)
    # 16 heads divide every model axis.
    assert plan.weight(ATTENTION + "key/kernel").spec == (
        "batch",
        "model",
        None,
    )
    assert plan.weight(ATTENTION + "key/bias").spec == ("model", None)
