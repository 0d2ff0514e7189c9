import numpy as np
import pytest
from keras import ops

from keras_nlp.distribution.dims import declared_dims
from keras_nlp.distribution.shapes import abstract_variables
from keras_nlp.layers import CachedGroupedQueryAttention
from keras_nlp.models.gemma import GemmaBackbone
from keras_nlp.models.gemma.gemma_decoder_block import GemmaDecoderBlock
from keras_nlp.models.gemma.gemma_decoder_block import gemma_attention
from tests.models.gemma.decoding import decode_step_by_step

TINY = dict(
    vocabulary_size=64,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=48,
    head_dim=8,
)
GEMMA_2 = dict(
    use_post_ffw_norm=True,
    use_post_attention_norm=True,
    attention_logit_soft_cap=50.0,
    final_logit_soft_cap=30.0,
    use_sliding_window_attention=True,
    sliding_window_size=3,
    query_head_dim_normalize=False,
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1], [0, 0, 3, 4, 8]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], "int32"),
}


def expected_paths(num_layers, post_norms, V=64, H=32, Nq=4, Nkv=2, Dh=8, F=24):
    """Variable path -> shape; `F` is the width of one feed-forward branch."""
    paths = {"token_embedding/embeddings": (V, H)}
    for i in range(num_layers):
        block = f"decoder_block_{i}"
        paths[f"{block}/pre_attention_norm/scale"] = (H,)
        paths[f"{block}/attention/query/kernel"] = (Nq, H, Dh)
        paths[f"{block}/attention/key/kernel"] = (Nkv, H, Dh)
        paths[f"{block}/attention/value/kernel"] = (Nkv, H, Dh)
        paths[f"{block}/attention/attention_output/kernel"] = (Nq, Dh, H)
        paths[f"{block}/pre_ffw_norm/scale"] = (H,)
        paths[f"{block}/ffw_gating/kernel"] = (H, F)
        paths[f"{block}/ffw_gating_2/kernel"] = (H, F)
        paths[f"{block}/ffw_linear/kernel"] = (F, H)
        if post_norms:
            paths[f"{block}/post_attention_norm/scale"] = (H,)
            paths[f"{block}/post_ffw_norm/scale"] = (H,)
    paths["final_normalization/scale"] = (H,)
    return paths


@pytest.mark.parametrize("post_norms", [False, True])
def test_variable_paths_and_shapes(post_norms):
    options = GEMMA_2 if post_norms else {}
    model = GemmaBackbone(**TINY, **options)
    actual = {v.path: tuple(v.shape) for v in model.weights}
    assert actual == expected_paths(2, post_norms)
    assert len(model.weights) == len(actual)  # no duplicate paths
    assert model.token_embedding.name == "token_embedding"
    assert model.layer_norm.name == "final_normalization"
    assert [b.name for b in model.transformer_layers] == [
        "decoder_block_0",
        "decoder_block_1",
    ]
    block = model.transformer_layers[0]
    assert block.attention.query_dense.name == "query"
    assert block.attention.output_dense.name == "attention_output"
    assert block.gating_ffw.name == "ffw_gating"
    assert block.gating_ffw_2.name == "ffw_gating_2"


def test_gemma_2b_en_paths_and_size_without_allocating():
    gemma_2b_en = GemmaBackbone.presets["gemma_2b_en"]
    # Shapes only: JAX traces the build under `jax.eval_shape`.
    variables = abstract_variables(lambda: GemmaBackbone(**gemma_2b_en))
    actual = {v.path: v.shape for v in variables}
    assert len(actual) == len(variables)
    assert actual == expected_paths(
        18, False, V=256000, H=2048, Nq=8, Nkv=1, Dh=256, F=16384
    )
    assert sum(v.size for v in variables) == 2_506_172_416


def test_sliding_window_on_even_blocks():
    model = GemmaBackbone(**TINY, **GEMMA_2)
    windows = [
        b.attention.sliding_window_size for b in model.transformer_layers
    ]
    assert windows == [3, None]
    assert all(
        b.attention.logit_soft_cap == 50.0 for b in model.transformer_layers
    )
    model = GemmaBackbone(**TINY)
    assert all(
        b.attention.sliding_window_size is None
        for b in model.transformer_layers
    )


def test_attention_is_the_shared_layer_with_heads_first_kernels():
    model = GemmaBackbone(**TINY, **GEMMA_2)
    attention = model.transformer_layers[0].attention
    assert isinstance(attention, CachedGroupedQueryAttention)
    assert attention.heads_first
    # query_head_dim_normalize=False: queries scaled by (32 / 4) ** -0.5.
    assert attention.query_scale == 8**-0.5
    assert attention.rotary_embedding.max_wavelength == 10_000.0
    dims = declared_dims(model)
    block = "decoder_block_0/"
    assert dims[block + "attention/query/kernel"] == (
        "heads",
        "hidden",
        "head_dim",
    )
    assert dims[block + "attention/key/kernel"] == (
        "kv_heads",
        "hidden",
        "head_dim",
    )
    assert dims[block + "attention/attention_output/kernel"] == (
        "heads",
        "head_dim",
        "hidden",
    )
    assert dims[block + "ffw_gating/kernel"] == ("hidden", "ffw")
    assert dims[block + "ffw_gating_2/kernel"] == ("hidden", "ffw")
    assert dims[block + "ffw_linear/kernel"] == ("ffw", "hidden")
    assert dims["token_embedding/embeddings"] == ("vocab", "hidden")


@pytest.mark.parametrize("options", [{}, GEMMA_2], ids=["gemma1", "gemma2"])
def test_blocks_decode_into_a_kv_cache_like_the_full_forward_pass(options):
    model = GemmaBackbone(**TINY, **options)
    expected = ops.convert_to_numpy(model(INPUTS))
    actual = decode_step_by_step(model, INPUTS)
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-5)


def test_invalid_head_ratio():
    with pytest.raises(ValueError) as error:
        GemmaBackbone(
            **{**TINY, "num_query_heads": 6, "num_key_value_heads": 4}
        )
    message = str(error.value)
    assert "num_query_heads=6" in message
    assert "num_key_value_heads=4" in message
    assert "must divide" in message


@pytest.mark.parametrize("options", [{}, GEMMA_2], ids=["gemma1", "gemma2"])
def test_training_with_dropout(options):
    model = GemmaBackbone(**TINY, **options, dropout=0.3)
    train = ops.convert_to_numpy(model(INPUTS, training=True))
    infer = ops.convert_to_numpy(model(INPUTS, training=False))
    assert train.shape == infer.shape == (2, 5, 32)
    assert np.all(np.isfinite(train))
    assert not np.allclose(train, infer)  # dropout is active in training
    np.testing.assert_array_equal(
        infer, ops.convert_to_numpy(model(INPUTS, training=False))
    )


def test_block_config_round_trip():
    block = GemmaDecoderBlock(
        attention=gemma_attention(
            hidden_dim=32,
            num_query_heads=4,
            num_key_value_heads=1,
            head_dim=8,
            logit_soft_cap=20.0,
            sliding_window_size=7,
            query_head_dim_normalize=False,
            dropout=0.1,
        ),
        hidden_dim=32,
        intermediate_dim=24,
        use_post_ffw_norm=True,
        layer_norm_epsilon=1e-5,
    )
    config = block.get_config()
    clone = GemmaDecoderBlock.from_config(config)
    assert clone.get_config() == config
    assert clone.attention.sliding_window_size == 7
    assert clone.attention.rotary_embedding.max_wavelength == 10_000.0
