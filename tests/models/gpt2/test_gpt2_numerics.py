"""Numerical parity of keras_nlp's GPT-2 with keras-hub's (the oracle)."""

import keras
import keras_hub
import numpy as np
import pytest

from keras_nlp.models.gpt2.gpt2_backbone import GPT2Backbone
from tests.models.backbone_checks import assert_matches_oracle
from tests.models.backbone_checks import copy_weights_by_path
from tests.models.backbone_checks import random_inputs

VOCAB = 97  # odd, like GPT-2's 50257
# name -> (num_heads, hidden_dim, intermediate_dim, dropout,
# max_sequence_length). keras-hub's attention takes its fused path with
# dropout 0 and its own softmax otherwise: both are covered.
CASES = {
    "heads1": (1, 32, 64, 0.0, 16),
    "heads4": (4, 32, 48, 0.0, 16),
    "heads4_dropout": (4, 32, 48, 0.1, 16),
    "heads5_dropout": (5, 40, 96, 0.1, 32),  # an odd head count, like 25
    "heads8_dropout": (8, 64, 128, 0.2, 12),
}


def make_config(name):
    num_heads, hidden_dim, intermediate_dim, dropout, length = CASES[name]
    return dict(
        vocabulary_size=VOCAB,
        num_layers=2,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        dropout=dropout,
        max_sequence_length=length,
    )


def sharpen(model, seed=0):
    """Unit-scale kernel outputs and embeddings, so attention is not flat.

    With the 0.02 initializers every logit is tiny and a wrong activation
    or position changes the outputs by less than the tolerance.
    """
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if variable.path.endswith("/kernel"):
            scale = variable.shape[0] ** -0.5
        elif variable.path.endswith("/embeddings"):
            scale = 1.0
        else:
            continue
        value = rng.normal(0.0, scale, variable.shape).astype("float32")
        variable.assign(value)


def make_pair(config, seed=0):
    keras.utils.set_random_seed(seed)
    oracle = keras_hub.models.GPT2Backbone(**config)
    sharpen(oracle, seed)
    return oracle, GPT2Backbone(**config)


@pytest.mark.parametrize("name", list(CASES))
def test_matches_keras_hub(name):
    config = make_config(name)
    oracle, ours = make_pair(config)
    inputs = random_inputs(VOCAB)
    max_diff = assert_matches_oracle(ours, oracle, inputs)
    print(f"{name}: max |ours - keras_hub| = {max_diff:.3e}")

    # The tied embedding projects back to the same vocabulary logits.
    hidden = keras.ops.convert_to_numpy(ours(inputs))
    logits = ours.token_embedding(hidden, reverse=True)
    expected = oracle.token_embedding(hidden, reverse=True)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(logits),
        keras.ops.convert_to_numpy(expected),
        atol=1e-5,
        rtol=1e-5,
    )


def test_training_mode_draws_dropout_masks():
    # Random masks differ between the two models, so only check that ours
    # runs in training and equals inference without dropout.
    config = make_config("heads4_dropout")
    oracle, ours = make_pair(config)
    copy_weights_by_path(oracle, ours)
    inputs = random_inputs(VOCAB)
    train = keras.ops.convert_to_numpy(ours(inputs, training=True))
    infer = keras.ops.convert_to_numpy(ours(inputs, training=False))
    assert np.all(np.isfinite(train))
    assert not np.allclose(train, infer)


def break_activation(model):
    for block in model.transformer_layers:
        block._activation = keras.activations.gelu  # exact, not tanh


def shift_positions(model):
    # OPT-style off-by-two positions: rows 2.. of the table for 0..
    table = model.position_embedding.embeddings
    values = keras.ops.convert_to_numpy(table)
    table.assign(np.concatenate([values[2:], values[:2]]))


@pytest.mark.parametrize("mistake", [break_activation, shift_positions])
def test_the_comparison_detects_mistakes(mistake):
    """The check above is sharp enough to see a wrong GELU or position."""
    config = make_config("heads4_dropout")
    oracle, ours = make_pair(config)
    inputs = random_inputs(VOCAB)
    assert_matches_oracle(ours, oracle, inputs)
    mistake(ours)
    real = inputs["padding_mask"].astype(bool)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(ours(inputs))[real],
            keras.ops.convert_to_numpy(oracle(inputs))[real],
            atol=1e-5,
            rtol=1e-5,
        )
