"""BLOOM layouts: full-size preset plans and tiny configs' fallbacks."""

import pytest

from keras_nlp.models.bloom.bloom_backbone import BloomBackbone
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import mesh_dict
from tests.models.tiny_configs import tiny_configs

pytestmark = pytest.mark.multi_device

PRESETS = list(BloomBackbone.presets)
# The tiny configs (tests/models/tiny_configs.py) are sharded on every mesh
# by tests/models/test_conformance.py; "odd_vocab_6_heads" has 6 heads,
# which no model axis above 2 divides, and an odd vocabulary.
TINY = tiny_configs("BloomBackbone")
ATTENTION = "transformer_layer_0/self_attention/"


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_plan_is_efficient(preset, mesh_shape):
    plan = assert_preset_plan_is_efficient(BloomBackbone, preset, mesh_shape)
    # 16 and 32 heads, the widths and the vocabulary divide every mesh axis
    # here: nothing falls back.
    assert not plan.fallbacks
    assert plan.memory_ratio <= 1.02
    # The flat output kernel shards heads * head_dim rows; each shard holds
    # whole heads, like the query, key and value kernels.
    config = BloomBackbone.presets[preset]
    head_dim = config["hidden_dim"] // config["num_heads"]
    for i in range(config["num_layers"]):
        path = f"transformer_layer_{i}/self_attention/output_dense/kernel"
        assert plan.weight(path).shard_shape[0] % head_dim == 0


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_exact_specs(preset):
    plan = BloomBackbone.plan_layout(mesh_dict((2, 4)), preset=preset)
    block = "transformer_layer_5/"
    attention = block + "self_attention/"
    expected = {
        "token_embedding/embeddings": ("model", "batch"),
        "embedding_layernorm/gamma": (None,),
        attention + "query_dense/kernel": ("batch", "model", None),
        attention + "query_dense/bias": ("model", None),
        attention + "key_dense/kernel": ("batch", "model", None),
        attention + "value_dense/bias": ("model", None),
        attention + "output_dense/kernel": ("model", "batch"),
        attention + "output_dense/bias": (None,),
        block + "mlp_intermediate_dense/kernel": ("batch", "model"),
        block + "mlp_output_dense/kernel": ("model", "batch"),
        block + "post_attention_layernorm/beta": (None,),
        "final_layernorm/gamma": (None,),
    }
    for path, spec in expected.items():
        assert plan.weight(path).spec == spec, path
    config = BloomBackbone.presets[preset]
    hidden, heads = config["hidden_dim"], config["num_heads"]
    assert plan.weight(attention + "query_dense/kernel").shard_shape == (
        hidden // 2,
        heads // 4,
        hidden // heads,
    )
    # Each output-kernel shard holds the rows of whole heads.
    rows = plan.weight(attention + "output_dense/kernel").shard_shape[0]
    assert rows % (hidden // heads) == 0


def test_six_heads_fall_back_whole_on_a_model_axis_of_four():
    plan = BloomBackbone.plan_layout(
        mesh_dict((1, 4)), config=TINY["odd_vocab_6_heads"]
    )
    for kind in ("query", "key", "value"):
        kernel = plan.weight(ATTENTION + f"{kind}_dense/kernel")
        assert kernel.shard_shape == (48, 6, 8)  # heads whole
        heads = "kv_heads" if kind != "query" else "heads"
        assert (
            f"dim 1 ({heads}, size 6) is not divisible by 'model'"
            in kernel.reason
        )
        bias = plan.weight(ATTENTION + f"{kind}_dense/bias")
        assert bias.shard_shape == (6, 8)
        assert f"dim 0 ({heads}, size 6)" in bias.reason
    # The flat output kernel's 48 rows divide by 4 although 6 heads do not:
    # it is sharded, 12 rows (one and a half 8-wide heads) per shard.
    output = plan.weight(ATTENTION + "output_dense/kernel")
    assert output.spec == ("model", "batch")
    assert output.shard_shape == (12, 48)
    # The odd vocabulary puts the model axis on the hidden dimension.
    embedding = plan.weight("token_embedding/embeddings")
    assert embedding.spec == ("batch", "model")
    assert embedding.decision == "alternative"
    assert len(plan.fallbacks) == 6
