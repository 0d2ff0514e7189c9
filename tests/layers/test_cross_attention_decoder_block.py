"""CrossAttentionDecoderBlock, pre-norm TransformerEncoderBlock and
cross-attention in CachedGroupedQueryAttention."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_nlp.distribution.dims import declared_dims
from keras_nlp.layers import CachedGroupedQueryAttention
from keras_nlp.layers import CrossAttentionDecoderBlock
from keras_nlp.layers import RotaryEmbedding
from keras_nlp.layers import TransformerEncoderBlock

HIDDEN = 16


def sequences(seed=0, batch=2, target=5, source=7):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(batch, target, HIDDEN)).astype("float32"),
        rng.normal(size=(batch, source, HIDDEN)).astype("float32"),
    )


def randomized_block(**kwargs):
    block = CrossAttentionDecoderBlock(
        num_heads=4, hidden_dim=HIDDEN, intermediate_dim=32, **kwargs
    )
    decoder, encoder = sequences()
    block(decoder, encoder)
    rng = np.random.default_rng(1)
    for variable in block.weights:
        variable.assign(rng.normal(0, 0.3, variable.shape).astype("float32"))
    return block


@pytest.mark.parametrize("normalize_first", [False, True])
def test_a_later_token_does_not_change_earlier_outputs(normalize_first):
    block = randomized_block(normalize_first=normalize_first)
    decoder, encoder = sequences()
    changed = decoder.copy()
    changed[:, -1] += 1.0
    before = ops.convert_to_numpy(block(decoder, encoder))
    after = ops.convert_to_numpy(block(changed, encoder))
    np.testing.assert_allclose(after[:, :-1], before[:, :-1], atol=1e-6)
    assert not np.allclose(after[:, -1], before[:, -1])


def test_padded_encoder_positions_are_not_attended():
    block = randomized_block()
    decoder, encoder = sequences()
    mask = np.ones((2, 7), "int32")
    mask[:, 4:] = 0
    changed = encoder.copy()
    changed[:, 4:] = 100.0
    before = block(decoder, encoder, encoder_padding_mask=mask)
    after = block(decoder, changed, encoder_padding_mask=mask)
    np.testing.assert_allclose(
        ops.convert_to_numpy(after), ops.convert_to_numpy(before), atol=1e-6
    )
    # Without the mask the encoder's padding is read.
    assert not np.allclose(
        ops.convert_to_numpy(block(decoder, changed)),
        ops.convert_to_numpy(before),
    )


def test_the_block_has_keras_hubs_sublayers_and_declares_their_dims():
    block = randomized_block(use_key_bias=False)
    paths = {v.path.split("/", 1)[1] for v in block.weights}
    for attention in ("self_attention", "cross_attention"):
        assert f"{attention}/key/kernel" in paths
        assert f"{attention}/key/bias" not in paths
        assert f"{attention}/value/bias" in paths
        assert f"{attention}_layer_norm/gamma" in paths
    assert "feedforward_intermediate_dense/kernel" in paths
    dims = {
        path.split("/", 1)[1]: names
        for path, names in declared_dims(block).items()
    }
    assert dims["cross_attention/key/kernel"] == (
        "hidden",
        "kv_heads",
        "head_dim",
    )
    assert dims["feedforward_output_dense/kernel"] == ("ffw", "hidden")


def test_decoder_block_config_round_trip():
    block = randomized_block(
        normalize_first=True, use_key_bias=False, dropout=0.1
    )
    config = block.get_config()
    clone = CrossAttentionDecoderBlock.from_config(config)
    assert clone.get_config() == config
    decoder, encoder = sequences()
    clone(decoder, encoder)
    clone.set_weights(block.get_weights())
    np.testing.assert_array_equal(
        ops.convert_to_numpy(clone(decoder, encoder)),
        ops.convert_to_numpy(block(decoder, encoder)),
    )


def test_pre_norm_encoder_block_normalizes_each_branch_input():
    attention = CachedGroupedQueryAttention(
        4, 4, use_bias=True, use_output_bias=True, name="self_attention_layer"
    )
    block = TransformerEncoderBlock(
        mixing=attention,
        hidden_dim=HIDDEN,
        intermediate_dim=32,
        normalize_first=True,
    )
    x, _ = sequences()
    y = ops.convert_to_numpy(block(x))
    h = x + ops.convert_to_numpy(attention(block.attention_norm(x)))
    fed = block.output_dense(
        block.intermediate_dense(block.feedforward_norm(h))
    )
    np.testing.assert_allclose(y, h + ops.convert_to_numpy(fed), atol=1e-5)
    config = block.get_config()
    assert config["normalize_first"] is True
    assert TransformerEncoderBlock.from_config(config).normalize_first


def test_cross_attention_reads_keys_and_values_from_the_other_sequence():
    attention = CachedGroupedQueryAttention(4, 4, use_bias=True)
    decoder, encoder = sequences()
    attention.build(decoder.shape)
    out = attention(decoder, key_value_inputs=encoder)
    assert out.shape == decoder.shape
    # One key: every query returns that key's value, projected.
    single = attention(decoder, key_value_inputs=encoder[:, :1])
    value = attention.value_dense(encoder[:, :1])
    expected = attention.output_dense(ops.repeat(value, 5, axis=1))
    np.testing.assert_allclose(
        ops.convert_to_numpy(single), ops.convert_to_numpy(expected), atol=1e-5
    )
    with pytest.raises(ValueError, match="cross-attention"):
        CachedGroupedQueryAttention(4, 4, rotary_embedding=RotaryEmbedding())(
            decoder, key_value_inputs=encoder
        )


def test_use_key_bias_overrides_use_bias_for_the_key_only():
    attention = CachedGroupedQueryAttention(
        4, 4, use_bias=True, use_key_bias=False
    )
    attention.build((None, None, HIDDEN))
    names = {v.path.split("/", 1)[1] for v in attention.weights}
    assert "key/bias" not in names
    assert {"query/bias", "value/bias"} <= names
    config = attention.get_config()
    assert config["use_key_bias"] is False
    assert (
        keras.saving.deserialize_keras_object(
            keras.saving.serialize_keras_object(attention)
        ).use_key_bias
        is False
    )


def test_a_decoder_block_without_the_encoders_outputs_names_both_sources():
    block = randomized_block()
    decoder, _ = sequences()
    with pytest.raises(ValueError) as error:
        block(decoder)
    # Keras prefixes the layer's call; the message is ours.
    assert (
        "CrossAttentionDecoderBlock needs the encoder's outputs: pass "
        "`encoder_sequence` or `cross_attention_cache`."
    ) in str(error.value)
