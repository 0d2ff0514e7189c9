"""F-Net layouts: every preset's plan on every mesh, and exact specs."""

import pytest

from keras_nlp.models.f_net.f_net_backbone import FNetBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_encoder_preset_meets_goals
from tests.models.backbone_checks import mesh_dict

pytestmark = pytest.mark.multi_device

PRESETS = list(FNetBackbone.presets)
BLOCK = "f_net_layer_1/"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_meets_the_goals(preset, mesh_shape):
    plan = assert_encoder_preset_meets_goals(FNetBackbone, preset, mesh_shape)
    # No heads, and 32000, 512, 768/1024 and 3072/4096 all divide by 8:
    # nothing falls back.
    assert not plan.fallbacks, [w.path for w in plan.fallbacks]


def test_base_on_an_8_way_axis_shards_every_matrix():
    plan = FNetBackbone.plan_layout(mesh_dict((1, 8)), preset="f_net_base_en")
    expected = {
        # 32000 = 8 x 4000: the vocabulary takes the model axis.
        "token_embedding/embeddings": ("model", "batch"),
        "position_embedding/embeddings": ("model", "batch"),
        "segment_embedding/embeddings": (None, None),
        # The (hidden, hidden) projection: its output on the model axis.
        "embedding_projection/kernel": ("batch", "model"),
        "embedding_projection/bias": (None,),
        # The blocks' only weights besides norms: the feed-forward.
        BLOCK + "intermediate_dense/kernel": ("batch", "model"),
        BLOCK + "output_dense/kernel": ("model", "batch"),
        BLOCK + "mixing_layer_norm/gamma": (None,),
        BLOCK + "output_layer_norm/beta": (None,),
        "pooled_dense/kernel": ("batch", "model"),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    assert plan.weight("segment_embedding/embeddings").decision == (
        "replicated"
    )
    # Every weight of a block is one of the above kinds.
    assert sorted(
        w.path.removeprefix(BLOCK) for w in plan.weights if BLOCK in w.path
    ) == sorted(
        f"{layer}/{variable}"
        for layer, variables in {
            "intermediate_dense": ("kernel", "bias"),
            "output_dense": ("kernel", "bias"),
            "mixing_layer_norm": ("gamma", "beta"),
            "output_layer_norm": ("gamma", "beta"),
        }.items()
        for variable in variables
    )


def test_lora_adapts_the_feed_forward():
    plan = FNetBackbone.plan_layout(
        mesh_dict((2, 4)), preset="f_net_base_en", lora_rank=8
    )
    adapters = [w.path for w in plan.weights if "/lora_kernel_" in w.path]
    # Two adapters on each of the two dense layers of 12 blocks.
    assert len(adapters) == 12 * 2 * 2
    assert plan.weight(BLOCK + "intermediate_dense/lora_kernel_b").spec == (
        None,
        "model",
    )
