"""Numerical parity of keras_nlp's ELECTRA with keras-hub's (the oracle)."""

import keras
import keras_hub
import numpy as np
import pytest

from keras_nlp.models.electra.electra_backbone import ElectraBackbone
from tests.models.backbone_checks import assert_encoder_matches_oracle
from tests.models.backbone_checks import copy_weights_by_path
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import random_inputs

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
    keras.utils.set_random_seed(seed)
    oracle = keras_hub.models.ElectraBackbone(**config)
    # Unit-scale weights, so that attention is far from uniform and a
    # wrong activation, segment or position shows.
    rng = np.random.default_rng(seed)
    for variable in oracle.weights:
        scale = variable.shape[0] ** -0.5 if len(variable.shape) > 1 else 1
        variable.assign(
            rng.normal(0.0, scale, variable.shape).astype("float32")
        )
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
    copy_weights_by_path(oracle, ours)
    train = output_arrays(ours(inputs, training=True))
    infer = output_arrays(ours(inputs, training=False))
    assert np.all(np.isfinite(train["sequence_output"]))
    assert not np.allclose(train["sequence_output"], infer["sequence_output"])


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
