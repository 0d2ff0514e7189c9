"""Numerical parity of keras_nlp's GPT-2 and OPT with keras-hub's (oracle)."""

import keras
import keras_hub
import numpy as np
import pytest

from tests.models.backbone_checks import assert_matches_oracle
from tests.models.backbone_checks import copy_weights_by_path
from tests.models.backbone_checks import random_inputs
from tests.models.gpt2.test_gpt2_family import GPT2
from tests.models.gpt2.test_gpt2_family import OPT

# family name -> (Family, vocabulary size, its own case). GPT-2's 50257 is
# odd, OPT's 50272 a multiple of 32; the own cases have the presets' head
# counts: GPT-2 XL's odd 25, OPT-125m's 12.
FAMILIES = {
    "gpt2": (GPT2, 97, "heads5_dropout"),
    "opt": (OPT, 96, "heads12_dropout"),
}
# name -> (num_heads, hidden_dim, intermediate_dim, dropout,
# max_sequence_length). keras-hub's attention takes its fused path with
# dropout 0 and its own softmax otherwise: both are covered.
CASES = {
    "heads1": (1, 32, 64, 0.0, 16),
    "heads4": (4, 32, 48, 0.0, 16),
    "heads4_dropout": (4, 32, 48, 0.1, 16),
    "heads8_dropout": (8, 64, 128, 0.2, 12),
    "heads5_dropout": (5, 40, 96, 0.1, 32),
    "heads12_dropout": (12, 48, 96, 0.1, 32),
}
COMMON = ["heads1", "heads4", "heads4_dropout", "heads8_dropout"]
FAMILY_CASES = [
    (family, name)
    for family, (_, _, own) in FAMILIES.items()
    for name in [*COMMON, own]
]


def make_config(family, name):
    num_heads, hidden_dim, intermediate_dim, dropout, length = CASES[name]
    return dict(
        vocabulary_size=FAMILIES[family][1],
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


def make_pair(family, config, seed=0):
    keras.utils.set_random_seed(seed)
    backbone_cls = FAMILIES[family][0].backbone_cls
    oracle = getattr(keras_hub.models, backbone_cls.__name__)(**config)
    sharpen(oracle, seed)
    return oracle, backbone_cls(**config)


@pytest.mark.parametrize("family, name", FAMILY_CASES)
def test_matches_keras_hub(family, name):
    config = make_config(family, name)
    oracle, ours = make_pair(family, config)
    inputs = random_inputs(config["vocabulary_size"])
    max_diff = assert_matches_oracle(ours, oracle, inputs)
    print(f"{family} {name}: max |ours - keras_hub| = {max_diff:.3e}")

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


@pytest.mark.parametrize("family", list(FAMILIES))
def test_training_mode_draws_dropout_masks(family):
    # Random masks differ between the two models, so only check that ours
    # runs in training and equals inference without dropout.
    config = make_config(family, "heads4_dropout")
    oracle, ours = make_pair(family, config)
    copy_weights_by_path(oracle, ours)
    inputs = random_inputs(config["vocabulary_size"])
    train = keras.ops.convert_to_numpy(ours(inputs, training=True))
    infer = keras.ops.convert_to_numpy(ours(inputs, training=False))
    assert np.all(np.isfinite(train))
    assert not np.allclose(train, infer)


def break_activation(family, model):
    # GPT-2 uses tanh GELU and OPT ReLU: exact GELU is wrong for both.
    for block in model.transformer_layers:
        block._activation = keras.activations.gelu


def shift_positions(family, model):
    # OPT checkpoints' two-row offset: rows 2.. of the table for 0..
    table = FAMILIES[family][0].position_table(model)
    values = keras.ops.convert_to_numpy(table)
    table.assign(np.concatenate([values[2:], values[:2]]))


@pytest.mark.parametrize("mistake", [break_activation, shift_positions])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_comparison_detects_mistakes(family, mistake):
    """The check above is sharp enough to see a wrong activation or offset."""
    config = make_config(family, "heads4_dropout")
    oracle, ours = make_pair(family, config)
    inputs = random_inputs(config["vocabulary_size"])
    assert_matches_oracle(ours, oracle, inputs)
    mistake(family, ours)
    real = inputs["padding_mask"].astype(bool)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(ours(inputs))[real],
            keras.ops.convert_to_numpy(oracle(inputs))[real],
            atol=1e-5,
            rtol=1e-5,
        )
