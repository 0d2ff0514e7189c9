"""Falcon layouts: the full-size preset plan and a tiny config's fallbacks."""

import pytest

from keras_nlp.models.falcon.falcon_backbone import FalconBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict
from tests.models.tiny_configs import tiny_configs

pytestmark = pytest.mark.multi_device

PRESET = "falcon_refinedweb_1b_en"
# The tiny configs (tests/models/tiny_configs.py) are sharded on every mesh
# by tests/models/test_conformance.py; "odd_vocab_6_heads" has 6 heads,
# which no model axis above 2 divides, and an odd vocabulary.
TINY = tiny_configs("FalconBackbone")
ATTENTION = "transformer_layer_0/attention/"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
def test_preset_plan_is_efficient(mesh_shape):
    plan = assert_preset_plan_is_efficient(FalconBackbone, PRESET, mesh_shape)
    # 32 heads, the widths and the vocabulary divide every mesh axis here.
    assert not plan.fallbacks
    assert plan.memory_ratio <= 1.02
    # The flat output kernel shards heads * head_dim rows; each shard holds
    # whole 64-wide heads, like the query, key and value kernels.
    for i in range(24):
        path = f"transformer_layer_{i}/attention/output_dense/kernel"
        assert plan.weight(path).shard_shape[0] % 64 == 0


def test_preset_exact_specs():
    plan = FalconBackbone.plan_layout(mesh_dict((2, 4)), preset=PRESET)
    block = "transformer_layer_11/"
    attention = block + "attention/"
    expected = {
        "token_embedding/embeddings": ("model", "batch"),
        attention + "query_dense/kernel": ("batch", "model", None),
        attention + "query_dense/bias": ("model", None),
        attention + "key_dense/kernel": ("batch", "model", None),
        attention + "value_dense/bias": ("model", None),
        attention + "output_dense/kernel": ("model", "batch"),
        attention + "output_dense/bias": (None,),
        block + "dense_h_to_4h/kernel": ("batch", "model"),
        block + "dense_4h_to_h/kernel": ("model", "batch"),
        block + "input_layernorm/gamma": (None,),
        "final_layernorm/beta": (None,),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    assert plan.weight(attention + "query_dense/kernel").shard_shape == (
        1024,
        8,
        64,
    )
    assert plan.weight(attention + "output_dense/kernel").shard_shape == (
        512,
        1024,
    )
    assert plan.weight("token_embedding/embeddings").shard_shape == (
        12576,
        1024,
    )


def test_six_heads_fall_back_whole_on_a_model_axis_of_eight():
    plan = FalconBackbone.plan_layout(
        mesh_dict((1, 8)), config=TINY["odd_vocab_6_heads"]
    )
    for kind in ("query", "key", "value"):
        kernel = plan.weight(ATTENTION + f"{kind}_dense/kernel")
        assert kernel.shard_shape == (48, 6, 8)  # heads whole
        heads = "kv_heads" if kind != "query" else "heads"
        assert (
            f"dim 1 ({heads}, size 6) is not divisible by 'model'"
            in kernel.reason
        )
    # The flat output kernel's 48 rows divide by 8 although 6 heads do not:
    # it is sharded, 6 rows (three quarters of an 8-wide head) per shard.
    output = plan.weight(ATTENTION + "output_dense/kernel")
    assert output.spec == ("model", "batch")
    assert output.shard_shape == (6, 48)
    # The odd vocabulary puts the model axis on the hidden dimension.
    embedding = plan.weight("token_embedding/embeddings")
    assert embedding.spec == ("batch", "model")
    assert embedding.shard_shape == (257, 6)


# tiiuae/falcon-7b and tiiuae/falcon-40b's shapes, as our options.
FALCON_7B = dict(
    vocabulary_size=65024,
    num_layers=32,
    num_attention_heads=71,
    hidden_dim=4544,
    intermediate_dim=18176,
    num_key_value_heads=1,
    rotary_max_wavelength=10000.0,
    parallel_residual=True,
    shared_layer_norm=True,
    use_bias=False,
)
FALCON_40B = dict(
    FALCON_7B,
    num_layers=60,
    num_attention_heads=128,
    hidden_dim=8192,
    intermediate_dim=32768,
    num_key_value_heads=8,
    shared_layer_norm=False,
)


def test_falcon_7b_plan_replicates_the_single_key_value_head():
    plan = FalconBackbone.plan_layout(mesh_dict((2, 4)), config=FALCON_7B)
    for kind in ("key", "value"):
        kernel = plan.weight(ATTENTION + f"{kind}_dense/kernel")
        assert kernel.spec == ("batch", None, None)
        assert kernel.shard_shape == (2272, 1, 64)
        assert "dim 1 (kv_heads, size 1) is not divisible" in kernel.reason
    # 71 query heads divide no model axis either; the widths shard.
    assert plan.weight(ATTENTION + "query_dense/kernel").spec[1] is None
    block = "transformer_layer_0/"
    assert plan.weight(block + "dense_h_to_4h/kernel").spec == (
        "batch",
        "model",
    )
    assert plan.weight(ATTENTION + "output_dense/kernel").spec == (
        "model",
        "batch",
    )
    # One norm per block, no biases.
    paths = {w.path for w in plan.weights if w.path.startswith(block)}
    assert block + "input_layernorm/gamma" in paths
    assert not [p for p in paths if p.endswith("/bias") or "ln_mlp" in p]


def test_falcon_40b_plan_shards_the_grouped_key_value_heads():
    plan = FalconBackbone.plan_layout(mesh_dict((2, 4)), config=FALCON_40B)
    assert not plan.fallbacks
    for kind, shard in (("query", (4096, 32, 64)), ("key", (4096, 2, 64))):
        kernel = plan.weight(ATTENTION + f"{kind}_dense/kernel")
        assert kernel.spec == ("batch", "model", None)
        assert kernel.shard_shape == shard
    for norm in ("ln_attn", "ln_mlp"):
        assert plan.weight(f"transformer_layer_0/{norm}/gamma").spec == (None,)
