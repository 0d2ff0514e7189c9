"""OPT layouts: full-size preset plans and tiny configs' fallbacks."""

import pytest

from keras_nlp.models.opt.opt_backbone import OPTBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict
from tests.models.opt.test_opt_backbone import OPT_350M
from tests.models.tiny_configs import tiny_configs

pytestmark = pytest.mark.multi_device

PRESETS = list(OPTBackbone.presets)
# The tiny configs (tests/models/tiny_configs.py) are sharded on every mesh
# by tests/models/test_conformance.py. A vocabulary divisible by 32, like
# 50272. 8 heads divide every model axis (like the 32 of 1.3b and up); 4
# fail on 8 only, like 125m's 12.
TINY = tiny_configs("OPTBackbone")
HEAD_CONFIGS = ["vocab_32x_8_heads", "vocab_32x_4_heads"]
EMBEDDINGS = "embeddings/"
BLOCK = "transformer_layer_5/"
ATTENTION = BLOCK + "self_attention/"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_is_efficient(preset, mesh_shape):
    plan = assert_preset_plan_is_efficient(OPTBackbone, preset, mesh_shape)
    config = OPTBackbone.presets[preset]
    if config["num_heads"] % mesh_shape[1] == 0:
        assert not plan.fallbacks
        assert plan.memory_ratio <= 1.02
    else:
        # opt_125m_en's 12 heads on a model axis of 8: only atomic heads.
        assert preset == "opt_125m_en" and mesh_shape[1] == 8
        for weight in plan.fallbacks:
            assert "/self_attention/" in weight.path
            assert "heads, size 12)" in weight.reason
        assert len(plan.fallbacks) == 7 * config["num_layers"]


def test_opt_2_7b_exact_specs():
    plan = OPTBackbone.plan_layout(mesh_dict((2, 4)), preset="opt_2.7b_en")
    expected = {
        EMBEDDINGS + "token_embedding/embeddings": ("model", "batch"),
        EMBEDDINGS + "position_embedding/embeddings": ("model", "batch"),
        ATTENTION + "query/kernel": ("batch", "model", None),
        ATTENTION + "key/kernel": ("batch", "model", None),
        ATTENTION + "value/bias": ("model", None),
        ATTENTION + "attention_output/kernel": ("model", None, "batch"),
        ATTENTION + "attention_output/bias": (None,),
        BLOCK + "feedforward_intermediate_dense/kernel": ("batch", "model"),
        BLOCK + "feedforward_output_dense/kernel": ("model", "batch"),
        BLOCK + "feedforward_layer_norm/gamma": (None,),
        "layer_norm/beta": (None,),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    # 80-wide heads stay whole: 8 of the 32 on each model shard.
    assert plan.weight(ATTENTION + "query/kernel").shard_shape == (1280, 8, 80)
    assert plan.weight(
        EMBEDDINGS + "token_embedding/embeddings"
    ).shard_shape == (50272 // 4, 2560 // 2)
    assert not plan.fallbacks


def test_opt_125m_heads_fall_back_on_a_model_axis_of_8():
    plan = OPTBackbone.plan_layout(mesh_dict((1, 8)), preset="opt_125m_en")
    query = plan.weight("transformer_layer_0/self_attention/query/kernel")
    assert query.spec == ("batch", None, None)  # batch has size 1
    assert (
        "dim 1 (heads, size 12) is not divisible by 'model' (size 8)"
        in query.reason
    )
    # The vocabulary divides: it stays on the model axis.
    embedding = plan.weight(EMBEDDINGS + "token_embedding/embeddings")
    assert embedding.spec == ("model", "batch")
    assert embedding.shard_shape == (50272 // 8, 768)


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("name", HEAD_CONFIGS)
def test_tiny_configs_fall_back_only_on_atomic_heads(name, mesh_shape):
    plan = OPTBackbone.plan_layout(mesh_dict(mesh_shape), config=TINY[name])
    if TINY[name]["num_heads"] % mesh_shape[1]:
        assert plan.fallbacks
        assert all("heads, size 4)" in w.reason for w in plan.fallbacks)
    else:
        assert not plan.fallbacks


def test_opt_350m_projections_are_sharded():
    plan = OPTBackbone.plan_layout(mesh_dict((2, 4)), config=OPT_350M)
    assert plan.weight(EMBEDDINGS + "project_in/kernel").spec == (
        "batch",
        "model",
    )
    assert plan.weight("project_out/kernel").spec == ("model", "batch")
    assert plan.weight(
        EMBEDDINGS + "token_embedding/embeddings"
    ).shard_shape == (
        50272 // 4,
        512 // 2,
    )
    assert not plan.fallbacks
    assert plan.memory_ratio <= 1.02
