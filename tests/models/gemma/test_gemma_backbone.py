import numpy as np
import pytest
from keras import ops

from keras_nlp.distribution.shapes import abstract_variables
from keras_nlp.models.gemma import GemmaBackbone
from keras_nlp.models.gemma.gemma_attention import GemmaAttention
from keras_nlp.models.gemma.gemma_decoder_block import GemmaDecoderBlock

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
    flags = [
        b.attention.use_sliding_window_attention
        for b in model.transformer_layers
    ]
    assert flags == [True, False]
    assert all(
        b.attention.logit_soft_cap == 50.0 for b in model.transformer_layers
    )
    model = GemmaBackbone(**TINY)
    assert not any(
        b.attention.use_sliding_window_attention
        for b in model.transformer_layers
    )


def test_invalid_head_ratio():
    with pytest.raises(ValueError) as error:
        GemmaBackbone(
            **{**TINY, "num_query_heads": 6, "num_key_value_heads": 4}
        )
    message = str(error.value)
    assert "num_query_heads=6" in message
    assert "num_key_value_heads=4" in message
    assert "multiple" in message


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


def test_layers_config_round_trip():
    attention = GemmaAttention(
        num_query_heads=4,
        num_key_value_heads=1,
        head_dim=8,
        logit_soft_cap=20.0,
        use_sliding_window_attention=True,
        sliding_window_size=7,
        query_head_dim_normalize=False,
        dropout=0.1,
    )
    config = attention.get_config()
    assert GemmaAttention.from_config(config).get_config() == config

    block = GemmaDecoderBlock(
        hidden_dim=32,
        intermediate_dim=48,
        head_dim=8,
        num_query_heads=4,
        num_key_value_heads=2,
        use_post_ffw_norm=True,
        logit_soft_cap=10.0,
        layer_norm_epsilon=1e-5,
    )
    config = block.get_config()
    assert GemmaDecoderBlock.from_config(config).get_config() == config
