"""Numerical parity of keras_nlp's BART with keras-hub's (the oracle)."""

import keras
import numpy as np
import pytest

from keras_nlp.models.bart.bart_backbone import BartBackbone
from tests.models.backbone_checks import assert_encoder_matches_oracle
from tests.models.backbone_checks import copy_weights_by_path
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import unit_scale_oracle
from tests.models.tiny_configs import TINY_CONFIGS

# name -> (num_heads, hidden_dim, intermediate_dim). The presets' 12
# (base) and 16 (large) heads, and a small 4.
CASES = {
    "heads4": (4, 32, 64),
    "heads12": (12, 48, 96),
    "heads16": (16, 64, 128),
}


def make_pair(name, seed=0, dropout=0.1):
    num_heads, hidden_dim, intermediate_dim = CASES[name]
    config = dict(
        vocabulary_size=97,
        num_layers=2,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        dropout=dropout,
        max_sequence_length=16,
    )
    oracle = unit_scale_oracle("BartBackbone", config, seed)
    # Padded on the right on both sides: every output is defined.
    inputs = TINY_CONFIGS["BartBackbone"].make_inputs(config, seed=seed)
    return oracle, BartBackbone(**config), inputs


@pytest.mark.parametrize("name", list(CASES))
def test_matches_keras_hub(name):
    """Both outputs, padded positions included, within 1e-5."""
    oracle, ours, inputs = make_pair(name)
    max_diff = assert_encoder_matches_oracle(ours, oracle, inputs)
    print(f"bart {name}: max |ours - keras_hub| = {max_diff:.3e}")


def test_training_mode_draws_dropout_masks():
    oracle, ours, inputs = make_pair("heads4")
    copy_weights_by_path(oracle, ours)
    train = output_arrays(ours(inputs, training=True))
    infer = output_arrays(ours(inputs, training=False))
    for name, value in train.items():
        assert np.all(np.isfinite(value)), name
        assert not np.allclose(value, infer[name]), name


def swap_position_tables(model):
    encoder = model.encoder_position_embedding.embeddings
    decoder = model.decoder_position_embedding.embeddings
    values = keras.ops.convert_to_numpy(encoder)
    encoder.assign(keras.ops.convert_to_numpy(decoder))
    decoder.assign(values)


def pre_norm_decoder(model):
    for block in model.decoder_transformer_layers:
        block.normalize_first = True


@pytest.mark.parametrize("mistake", [swap_position_tables, pre_norm_decoder])
def test_the_comparison_detects_mistakes(mistake):
    """The check sees swapped position tables or a pre-norm decoder."""
    oracle, ours, inputs = make_pair("heads4", dropout=0.0)
    assert_encoder_matches_oracle(ours, oracle, inputs)
    mistake(ours)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(
            output_arrays(ours(inputs))["decoder_sequence_output"],
            output_arrays(oracle(inputs))["decoder_sequence_output"],
            atol=1e-5,
        )
