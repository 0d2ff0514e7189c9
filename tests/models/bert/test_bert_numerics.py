"""Numerical parity of keras_nlp's BERT with keras-hub's (the oracle)."""

import keras
import numpy as np
import pytest

from keras_nlp.models.bert.bert_backbone import BertBackbone
from tests.models.backbone_checks import assert_dropout_in_training
from tests.models.backbone_checks import assert_encoder_matches_oracle
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import random_inputs
from tests.models.backbone_checks import unit_scale_oracle

# name -> (num_heads, hidden_dim, intermediate_dim, num_segments). The
# presets' 2 (tiny), 8 (small, medium) and 12 (base) heads.
CASES = {
    "heads2": (2, 32, 64, 2),
    "heads8_segments3": (8, 64, 96, 3),
    "heads12": (12, 48, 96, 2),
}


def make_pair(name, seed=0):
    num_heads, hidden_dim, intermediate_dim, num_segments = CASES[name]
    config = dict(
        vocabulary_size=98,
        num_layers=2,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        max_sequence_length=16,
        num_segments=num_segments,
    )
    oracle = unit_scale_oracle("BertBackbone", config, seed)
    inputs = random_inputs(98, num_segments=num_segments)
    return oracle, BertBackbone(**config), inputs


@pytest.mark.parametrize("name", list(CASES))
def test_matches_keras_hub(name):
    oracle, ours, inputs = make_pair(name)
    max_diff = assert_encoder_matches_oracle(ours, oracle, inputs)
    print(f"bert {name}: max |ours - keras_hub| = {max_diff:.3e}")


def test_training_mode_draws_dropout_masks():
    oracle, ours, inputs = make_pair("heads2")
    assert_dropout_in_training(ours, oracle, inputs)


def swap_segments(model):
    table = model.segment_embedding.embeddings
    values = keras.ops.convert_to_numpy(table)
    table.assign(values[::-1])


def exact_gelu(model):
    for block in model.transformer_layers:
        block.intermediate_dense.activation = keras.activations.gelu


@pytest.mark.parametrize("mistake", [swap_segments, exact_gelu])
def test_the_comparison_detects_mistakes(mistake):
    """The check is sharp enough to see swapped segments or exact GELU."""
    oracle, ours, inputs = make_pair("heads8_segments3")
    assert_encoder_matches_oracle(ours, oracle, inputs)
    mistake(ours)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(
            output_arrays(ours(inputs))["sequence_output"],
            output_arrays(oracle(inputs))["sequence_output"],
            atol=1e-5,
        )
