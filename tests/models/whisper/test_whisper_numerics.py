"""Numerical parity of keras_nlp's Whisper with keras-hub's (the oracle)."""

import keras
import numpy as np
import pytest

from keras_nlp.models.whisper.whisper_backbone import WhisperBackbone
from keras_nlp.models.whisper.whisper_backbone import WhisperSinusoids
from tests.models.backbone_checks import assert_encoder_matches_oracle
from tests.models.backbone_checks import copy_weights_by_path
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import unit_scale_oracle
from tests.models.tiny_configs import TINY_CONFIGS

# name -> (num_heads, hidden_dim, intermediate_dim, num_mels, frames). The
# presets' 6 (tiny), 8 (base) and 20 (large) heads; odd and even frames.
CASES = {
    "heads6": (6, 48, 96, 8, 12),
    "heads8_odd_frames": (8, 64, 128, 16, 11),
    "heads20": (20, 80, 96, 8, 12),
}


def make_pair(name, seed=0, dropout=0.0):
    num_heads, hidden_dim, intermediate_dim, num_mels, frames = CASES[name]
    config = dict(
        vocabulary_size=96,
        num_layers=2,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        num_mels=num_mels,
        dropout=dropout,
        max_encoder_sequence_length=32,
        max_decoder_sequence_length=16,
    )
    # The convolutions' kernels by their fan-in (window x channels).
    conv = "encoder_token_embedding_conv_layer_"
    scales = {
        conv + "1/kernel": (3 * num_mels) ** -0.5,
        conv + "2/kernel": (3 * hidden_dim) ** -0.5,
    }
    oracle = unit_scale_oracle("WhisperBackbone", config, seed, scales)
    # The decoder padded on the right: every output is defined.
    inputs = TINY_CONFIGS["WhisperBackbone"].make_inputs(
        config, length=frames, seed=seed
    )
    return oracle, WhisperBackbone(**config), inputs


@pytest.mark.parametrize("name", list(CASES))
def test_matches_keras_hub(name):
    """Both outputs, padded decoder positions included, within 1e-5."""
    oracle, ours, inputs = make_pair(name)
    max_diff = assert_encoder_matches_oracle(ours, oracle, inputs)
    print(f"whisper {name}: max |ours - keras_hub| = {max_diff:.3e}")


def test_training_mode_draws_dropout_masks():
    oracle, ours, inputs = make_pair("heads6", dropout=0.1)
    copy_weights_by_path(oracle, ours)
    train = output_arrays(ours(inputs, training=True))
    infer = output_arrays(ours(inputs, training=False))
    for name, value in train.items():
        assert np.all(np.isfinite(value)), name
        assert not np.allclose(value, infer[name]), name


def test_encoder_positions_are_fixed_sinusoids():
    """Whisper's table: sin then cos of position / 10000 ** (i / (C/2 - 1))
    (its first row is zeros then ones); never trained."""
    backbone = WhisperBackbone(
        **TINY_CONFIGS["WhisperBackbone"].configs["tiny"]
    )
    table = backbone.encoder_position_embedding.embeddings
    assert not table.trainable
    values = keras.ops.convert_to_numpy(table)
    half = values.shape[1] // 2
    np.testing.assert_allclose(values[0], [0.0] * half + [1.0] * half)
    np.testing.assert_allclose(values[5, 0], np.sin(5.0), rtol=1e-6)
    np.testing.assert_allclose(values[5, half - 1], np.sin(5e-4), rtol=1e-4)
    expected = WhisperSinusoids()((values.shape[0], values.shape[1]))
    np.testing.assert_allclose(values, keras.ops.convert_to_numpy(expected))


def reversed_encoder_positions(model):
    table = model.encoder_position_embedding.embeddings
    table.assign(keras.ops.convert_to_numpy(table)[::-1])


def post_norm_decoder(model):
    for block in model.decoder_transformer_layers:
        block.normalize_first = False


@pytest.mark.parametrize(
    "mistake", [reversed_encoder_positions, post_norm_decoder]
)
def test_the_comparison_detects_mistakes(mistake):
    """The check sees misplaced encoder positions (through the
    cross-attention) or a post-norm decoder."""
    oracle, ours, inputs = make_pair("heads6")
    assert_encoder_matches_oracle(ours, oracle, inputs)
    mistake(ours)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(
            output_arrays(ours(inputs))["decoder_sequence_output"],
            output_arrays(oracle(inputs))["decoder_sequence_output"],
            atol=1e-5,
        )
