"""Gemma3Backbone plans for every preset and a tiny config's embedding."""

import pytest

from keras_nlp.models.gemma3.gemma3_backbone import Gemma3Backbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict
from tests.models.tiny_configs import tiny_configs

pytestmark = pytest.mark.multi_device

# The tiny configs (tests/models/tiny_configs.py), with the presets' head
# ratios, are sharded on every mesh by tests/models/test_conformance.py;
# "gqa_8_4_odd_vocab" has an odd (prime) vocabulary, so the embedding takes
# its (DATA, MODEL) alternative or falls back.
TINY = tiny_configs("Gemma3Backbone")


def attention_paths(num_layers, kinds):
    return {
        f"decoder_block_{i}/attention/{kind}/kernel"
        for i in range(num_layers)
        for kind in kinds
    }


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", list(Gemma3Backbone.presets))
def test_every_preset_plans_efficiently(preset, mesh_shape):
    plan = assert_preset_plan_is_efficient(Gemma3Backbone, preset, mesh_shape)
    config = Gemma3Backbone.presets[preset]
    model_size = mesh_shape[1]
    # Exactly the attention kernels whose heads don't divide the model axis
    # fall back (heads are atomic); everything else shards.
    expected = set()
    if config["num_query_heads"] % model_size:
        expected |= attention_paths(
            config["num_layers"], ("query", "attention_output")
        )
    if config["num_key_value_heads"] % model_size:
        expected |= attention_paths(config["num_layers"], ("key", "value"))
    assert {w.path for w in plan.fallbacks} == expected
    for weight in plan.fallbacks:
        assert "heads" in weight.reason, weight.reason
    assert plan.weight("token_embedding/embeddings").spec == ("model", "batch")
    if not expected:
        assert plan.memory_ratio <= 1.02


def test_gemma3_1b_specs_on_a_1x8_mesh():
    plan = Gemma3Backbone.plan_layout(mesh_dict((1, 8)), preset="gemma3_1b")
    block = "decoder_block_0/"
    # 4 query heads and 1 key/value head don't divide 8: replicated along
    # 'model', with the reason naming the heads.
    for kind in ("query", "key", "value"):
        weight = plan.weight(block + f"attention/{kind}/kernel")
        assert weight.spec == (None, "batch", None)
        heads = "heads, size 4" if kind == "query" else "kv_heads, size 1"
        assert f"dim 0 ({heads}) is not divisible by 'model'" in weight.reason
    assert plan.weight(block + "attention/attention_output/kernel").spec == (
        None,
        None,
        "batch",
    )
    assert plan.weight(block + "ffw_gating/kernel").spec == ("batch", "model")
    assert plan.weight(block + "ffw_linear/kernel").spec == ("model", "batch")
    assert plan.weight(block + "attention/query_norm/scale").spec == (None,)
    assert plan.weight("token_embedding/embeddings").spec == ("model", "batch")


@pytest.mark.parametrize("preset", ["gemma3_4b_text", "gemma3_27b_text"])
def test_grouped_presets_shard_every_kernel_on_a_2x4_mesh(preset):
    plan = Gemma3Backbone.plan_layout(mesh_dict((2, 4)), preset=preset)
    block = "decoder_block_3/"
    expected = {
        "token_embedding/embeddings": ("model", "batch"),
        block + "attention/query/kernel": ("model", "batch", None),
        block + "attention/key/kernel": ("model", "batch", None),
        block + "attention/value/kernel": ("model", "batch", None),
        block + "attention/attention_output/kernel": ("model", None, "batch"),
        block + "attention/query_norm/scale": (None,),
        block + "attention/key_norm/scale": (None,),
        block + "ffw_gating/kernel": ("batch", "model"),
        block + "ffw_gating_2/kernel": ("batch", "model"),
        block + "ffw_linear/kernel": ("model", "batch"),
        "final_normalization/scale": (None,),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    assert plan.fallbacks == ()


def test_gemma3_4b_kv_heads_fall_back_on_8_way_model_axis():
    plan = Gemma3Backbone.plan_layout(
        mesh_dict((1, 8)), preset="gemma3_4b_text"
    )
    key = plan.weight("decoder_block_0/attention/key/kernel")
    assert key.spec == (None, "batch", None)
    assert "dim 0 (kv_heads, size 4)" in key.reason
    query = plan.weight("decoder_block_0/attention/query/kernel")
    assert query.spec == ("model", "batch", None)


@pytest.mark.parametrize(
    "mesh_shape, spec",
    [
        ((1, 2), ("batch", "model")),
        ((1, 8), ("batch", "model")),
        ((2, 4), (None, ("batch", "model"))),
        ((8, 1), ("model", "batch")),
    ],
    ids=str,
)
def test_odd_vocabulary_embedding(mesh_shape, spec):
    plan = Gemma3Backbone.plan_layout(
        mesh_dict(mesh_shape), config=TINY["gqa_8_4_odd_vocab"]
    )
    assert plan.weight("token_embedding/embeddings").spec == spec


@pytest.mark.parametrize(
    "mesh_shape, specs",
    [
        ((1, 8), [("batch", "model"), ("batch", "model")]),
        # 24 is not divisible by 16: the first projection falls back.
        ((1, 16), [("batch", None), ("batch", "model")]),
    ],
    ids=str,
)
def test_embedding_head_output_widths_on_the_model_axis(mesh_shape, specs):
    config = dict(
        TINY["tiny"],
        is_embedding_model=True,
        pooling_intermediate_dim=24,
        embedding_dim=16,
    )
    plan = Gemma3Backbone.plan_layout(mesh_dict(mesh_shape), config=config)
    paths = ["pooling_dense_1/kernel", "embedding_projection/kernel"]
    assert [plan.weight(path).spec for path in paths] == specs
