"""Numerical parity of keras_nlp's ELECTRA with keras-hub's (the oracle)."""

import keras
import numpy as np
import pytest

from keras_nlp.models.electra.electra_backbone import ElectraBackbone
from tests.models.backbone_checks import assert_dropout_in_training
from tests.models.backbone_checks import assert_encoder_matches_oracle
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import random_inputs
from tests.models.backbone_checks import unit_scale_oracle

# name -> (num_heads, hidden_dim, embedding_dim, num_segments). Small's 4
# heads over embeddings projected up, base's 12 heads without a projection.
CASES = {
    "heads4_projected": (4, 32, 16, 2),
    "heads12_unprojected_segments3": (12, 48, 48, 3),
}


def make_pair(name, seed=0):
    num_heads, hidden_dim, embedding_dim, num_segments = CASES[name]
    config = dict(
        vocab_size=98,
        num_layers=2,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        embedding_dim=embedding_dim,
        intermediate_dim=64,
        max_sequence_length=16,
        num_segments=num_segments,
    )
    oracle = unit_scale_oracle("ElectraBackbone", config, seed)
    inputs = random_inputs(98, num_segments=num_segments)
    return oracle, ElectraBackbone(**config), inputs


@pytest.mark.parametrize("name", list(CASES))
def test_matches_keras_hub(name):
    oracle, ours, inputs = make_pair(name)
    max_diff = assert_encoder_matches_oracle(ours, oracle, inputs)
    print(f"electra {name}: max |ours - keras_hub| = {max_diff:.3e}")


@pytest.mark.parametrize("name", list(CASES))
def test_projection_only_when_embeddings_are_narrower(name):
    _, ours, _ = make_pair(name)
    projected = CASES[name][1] != CASES[name][2]
    assert (ours.embeddings_projection is not None) == projected
    paths = {v.path for v in ours.weights}
    assert ("embeddings_projection/kernel" in paths) == projected


def test_training_mode_draws_dropout_masks():
    oracle, ours, inputs = make_pair("heads4_projected")
    assert_dropout_in_training(ours, oracle, inputs)


def swap_segments(model):
    table = model.segment_embedding.embeddings
    values = keras.ops.convert_to_numpy(table)
    table.assign(values[::-1])


def exact_gelu(model):
    for block in model.transformer_layers:
        block.intermediate_dense.activation = keras.activations.gelu


def skip_projection_bias(model):
    bias = model.embeddings_projection.bias
    bias.assign(np.zeros(bias.shape, "float32"))


@pytest.mark.parametrize(
    "mistake", [swap_segments, exact_gelu, skip_projection_bias]
)
def test_the_comparison_detects_mistakes(mistake):
    """The check is sharp enough to see swapped segments, exact GELU or a
    projection without its bias."""
    oracle, ours, inputs = make_pair("heads4_projected")
    assert_encoder_matches_oracle(ours, oracle, inputs)
    mistake(ours)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(
            output_arrays(ours(inputs))["sequence_output"],
            output_arrays(oracle(inputs))["sequence_output"],
            atol=1e-5,
        )
