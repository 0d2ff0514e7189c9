"""The shared ViT block and encoder: names, dimensions, rules, config."""

import re

import keras
import numpy as np

from keras_nlp.distribution.dims import declared_dims
from keras_nlp.layers import VisionTransformerBlock
from keras_nlp.layers import VisionTransformerEncoder
from keras_nlp.layers.vit_encoder import vision_transformer_rules


def make_encoder():
    encoder = VisionTransformerEncoder(
        image_size=8,
        patch_size=4,
        hidden_dim=16,
        num_layers=2,
        num_heads=4,
        intermediate_dim=24,
        name="image_encoder",
    )
    encoder(np.zeros((2, 8, 8, 3), "float32"))
    return encoder


def test_paths_and_declared_dimensions():
    encoder = make_encoder()
    dims = declared_dims(encoder)
    block = "image_encoder/encoder_block_1/"
    attention = block + "multi_head_attention/"
    assert dims[attention + "query_proj/kernel"] == ("hidden", "heads")
    assert dims[attention + "query_proj/bias"] == ("heads",)
    assert dims[attention + "out_proj/kernel"] == ("heads", "hidden")
    assert dims[block + "mlp_dense_1/kernel"] == ("hidden", "ffw")
    assert dims[block + "mlp_dense_2/kernel"] == ("ffw", "hidden")
    embeddings = "image_encoder/encoder_embeddings/"
    assert dims[embeddings + "embedding_conv/kernel"] == (
        "patch_height",
        "patch_width",
        "channels",
        "hidden",
    )
    assert dims[embeddings + "position_embedding/embeddings"] == (
        "position",
        "hidden",
    )
    assert encoder.compute_output_shape((2, 8, 8, 3)) == (2, 4, 16)


def test_rules_cover_every_matrix_once_and_follow_its_dimensions():
    encoder = make_encoder()
    dims = declared_dims(encoder)
    rules = vision_transformer_rules("image_encoder/")
    for variable in encoder.weights:
        matches = [r for r in rules if re.fullmatch(r[0], variable.path)]
        assert len(matches) <= 1, variable.path
        if len(variable.shape) > 1:
            assert matches, variable.path
        for _, _, rule_dims in matches:
            assert rule_dims == dims[variable.path], variable.path


def test_block_is_pre_norm_attention_then_mlp():
    """Numerically: h = x + attn(ln1(x)); y = h + mlp(ln2(h))."""
    block = VisionTransformerBlock(num_heads=2, intermediate_dim=12)
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    y = keras.ops.convert_to_numpy(block(x))
    h = x + keras.ops.convert_to_numpy(block.attention(block.layer_norm_1(x)))
    mlp = block.mlp_dense_1(block.layer_norm_2(h))
    mlp = block.mlp_dense_2(keras.activations.gelu(mlp, approximate=True))
    np.testing.assert_allclose(
        y, h + keras.ops.convert_to_numpy(mlp), atol=1e-5
    )


def test_config_round_trip():
    block = VisionTransformerBlock(
        num_heads=2, intermediate_dim=12, layer_norm_epsilon=1e-5
    )
    clone = VisionTransformerBlock.from_config(block.get_config())
    assert clone.get_config() == block.get_config()
    encoder = make_encoder()
    clone = VisionTransformerEncoder.from_config(encoder.get_config())
    assert clone.get_config() == encoder.get_config()
