"""Numerical parity of keras_nlp's T5 with keras-hub's (the oracle)."""

import re

import keras
import numpy as np
import pytest

from keras_nlp.models.t5.t5_backbone import T5Backbone
from keras_nlp.models.t5.t5_layers import relative_position_buckets
from tests.models.backbone_checks import assert_outputs_close
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import unit_scale_oracle
from tests.models.tiny_configs import TINY_CONFIGS

_BASE = dict(vocabulary_size=96, num_layers=2, dropout=0.1)
# t5_*_multi: ReLU, tied, key_value_dim from the heads; flan / T5 1.1:
# gated GELU, untied, 6 heads of an explicit width (flan_small's 6 x 64
# on 512).
CASES = {
    "t5_relu_tied": dict(
        _BASE,
        num_heads=4,
        hidden_dim=32,
        intermediate_dim=64,
        activation="relu",
        use_gated_activation=False,
        tie_embedding_weights=True,
    ),
    "flan_gated_untied": dict(
        _BASE,
        num_heads=6,
        hidden_dim=32,
        key_value_dim=8,
        intermediate_dim=48,
        activation="gelu",
        use_gated_activation=True,
        tie_embedding_weights=False,
    ),
}


def without_suffixes(path):
    return re.sub(r"_\d+(?=/|$)", "", path)


def copy_weights_in_order(source, target):
    """Copies `source`'s weights into `target`, one by one in order.

    By path would not do: both relative bias tables are at
    `self_attention/embeddings`, the encoder's first.
    """
    pairs = list(zip(source.weights, target.weights, strict=True))
    for theirs, ours in pairs:
        # Auto-named norms differ only in their `_N` suffixes.
        assert without_suffixes(theirs.path) == without_suffixes(ours.path)
        assert tuple(theirs.shape) == tuple(ours.shape), ours.path
        ours.assign(keras.ops.convert_to_numpy(theirs))


def long_inputs(config, length=40, seed=0):
    """Inputs longer than the 8 exact buckets, both sides right-padded, so
    log-scaled buckets and padded positions are compared too."""
    return TINY_CONFIGS["T5Backbone"].make_inputs(
        config, batch=3, length=length, seed=seed
    )


def make_pair(name, seed=0, **overrides):
    config = {**CASES[name], **overrides}
    oracle = unit_scale_oracle("T5Backbone", config, seed)
    ours = T5Backbone(**config)
    copy_weights_in_order(oracle, ours)
    return oracle, ours, config


@pytest.mark.parametrize("name", list(CASES))
def test_matches_keras_hub(name):
    """Both outputs, padded positions included, within 1e-5."""
    oracle, ours, config = make_pair(name)
    for inputs in (
        TINY_CONFIGS["T5Backbone"].make_inputs(config),
        long_inputs(config),
    ):
        expected = output_arrays(oracle(inputs))
        actual = output_arrays(ours(inputs))
        assert_outputs_close(actual, expected, atol=1e-5)
        diff = max(np.max(np.abs(actual[k] - v)) for k, v in expected.items())
        print(f"t5 {name}: max |ours - keras_hub| = {diff:.3e}")


@pytest.mark.parametrize("bidirectional", [True, False])
def test_relative_buckets_equal_keras_hub(bidirectional):
    from keras_hub.src.models.t5.t5_multi_head_attention import (
        T5MultiHeadAttention,
    )

    length = 300  # past max_distance (128)
    offsets = (
        keras.ops.arange(length)[None, :] - keras.ops.arange(length)[:, None]
    )
    expected = T5MultiHeadAttention._relative_position_bucket(
        offsets, bidirectional=bidirectional
    )
    actual = relative_position_buckets(length, length, bidirectional)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(actual), keras.ops.convert_to_numpy(expected)
    )


def test_training_mode_draws_dropout_masks():
    _, ours, config = make_pair("flan_gated_untied")
    inputs = TINY_CONFIGS["T5Backbone"].make_inputs(config)
    train = output_arrays(ours(inputs, training=True))
    infer = output_arrays(ours(inputs, training=False))
    for name, value in train.items():
        assert np.all(np.isfinite(value)), name
        assert not np.allclose(value, infer[name]), name


def swap_bias_tables(model):
    encoder = model.encoder_transformer_layers[0].self_attention
    decoder = model.decoder_transformer_layers[0].self_attention
    encoder, decoder = (
        encoder.relative_attention_bias,
        decoder.relative_attention_bias,
    )
    values = keras.ops.convert_to_numpy(encoder)
    encoder.assign(keras.ops.convert_to_numpy(decoder))
    decoder.assign(values)


def bidirectional_decoder(model):
    for block in model.decoder_transformer_layers:
        block.self_attention.is_decoder = False


def ungated(model):
    for block in model.decoder_transformer_layers:
        block.use_gated_activation = False


@pytest.mark.parametrize(
    "mistake", [swap_bias_tables, bidirectional_decoder, ungated]
)
def test_the_comparison_detects_mistakes(mistake):
    """The check sees swapped encoder/decoder bias tables (same path), a
    decoder with encoder buckets, or a dropped gate."""
    oracle, ours, config = make_pair("flan_gated_untied", dropout=0.0)
    inputs = TINY_CONFIGS["T5Backbone"].make_inputs(config)
    expected = output_arrays(oracle(inputs))
    assert_outputs_close(output_arrays(ours(inputs)), expected)
    mistake(ours)
    # Eager: the functional graph would keep the traced behaviour.
    actual = output_arrays(ours(inputs))
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(
            actual["decoder_sequence_output"],
            expected["decoder_sequence_output"],
            atol=1e-5,
        )
