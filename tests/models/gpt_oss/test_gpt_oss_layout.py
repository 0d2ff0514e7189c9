"""GPT-OSS plans for the presets (no devices: plans allocate nothing).

The tiny configs (tests/models/tiny_configs.py) are sharded on every mesh
by tests/models/test_conformance.py, and on expert meshes by
tests/models/test_expert_parallel.py; "e6_top3_gqa_16_2_yarn" has 6
experts that no 4- or 8-way axis divides.
"""

import pytest

from keras_nlp.models.gpt_oss.gpt_oss_backbone import GptOssBackbone
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict

PRESETS = list(GptOssBackbone.presets)
BLOCK = "transformer_layer_0/"
MOE = BLOCK + "sparse_moe_block/"
# 32 or 128 experts, 64:8 heads and the vocabulary (201088 = 2^7 * 1571)
# divide every model axis up to 8.
MESHES = [(1, 8), (2, 4)]


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_plans_within_2_percent_of_the_ideal(preset, mesh_shape):
    plan = assert_preset_plan_is_efficient(GptOssBackbone, preset, mesh_shape)
    assert plan.fallbacks == ()
    assert plan.memory_ratio <= 1.02
    router = plan.weight(MOE + "router/router_dense/kernel")
    assert router.decision == "replicated"
    experts = GptOssBackbone.presets[preset]["num_experts"]
    batch, model = mesh_shape
    assert plan.weight(MOE + "experts/gate_up_proj").shard_shape == (
        experts // model,
        2880 // batch,
        5760,
    )


def test_preset_specs_on_a_2x4_mesh():
    plan = GptOssBackbone.plan_layout(
        mesh_dict((2, 4)), preset="gpt_oss_20b_en"
    )
    attention = BLOCK + "self_attention/"
    expected = {
        "token_embedding/embeddings": ("model", "batch"),
        "token_embedding/reverse_embeddings": ("batch", "model"),
        attention + "query/kernel": ("batch", "model", None),
        attention + "query/bias": ("model", None),
        attention + "key/kernel": ("batch", "model", None),
        attention + "value/bias": ("model", None),
        attention + "attention_output/kernel": ("model", None, "batch"),
        attention + "sinks": (None,),
        MOE + "router/router_dense/kernel": (None, None),
        MOE + "router/router_dense/bias": (None,),
        MOE + "experts/gate_up_proj": ("model", "batch", None),
        MOE + "experts/gate_up_proj_bias": ("model", None),
        MOE + "experts/down_proj": ("model", None, "batch"),
        MOE + "experts/down_proj_bias": ("model", "batch"),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
