"""Numerical parity of keras_nlp's DistilBERT with keras-hub's (the oracle)."""

import functools

import keras
import pytest

from keras_nlp.models.distil_bert.distil_bert_backbone import DistilBertBackbone
from tests.models.backbone_checks import assert_dropout_in_training
from tests.models.backbone_checks import assert_encoder_matches_oracle
from tests.models.backbone_checks import assert_outputs_close
from tests.models.backbone_checks import random_inputs
from tests.models.backbone_checks import unit_scale_oracle

# name -> (num_heads, hidden_dim, intermediate_dim). The preset's 12 heads
# (and 3072 = 4 x 768 feed-forward), and 2; a vocabulary like 30522.
CASES = {
    "heads2": (2, 32, 64),
    "heads12": (12, 48, 192),
}
VOCABULARY_SIZE = 98


def make_pair(name, seed=0, embedding_scale=None):
    """keras-hub's DistilBERT with unit-scale random weights, ours, inputs.

    `embedding_scale` shrinks the embedding tables so far that the
    embeddings' LayerNorm epsilon matters.
    """
    num_heads, hidden_dim, intermediate_dim = CASES[name]
    config = dict(
        vocabulary_size=VOCABULARY_SIZE,
        num_layers=2,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        max_sequence_length=16,
    )
    oracle = unit_scale_oracle(
        "DistilBertBackbone",
        config,
        seed,
        scales=(
            {"token_and_position_embedding/": embedding_scale}
            if embedding_scale
            else None
        ),
    )
    inputs = random_inputs(VOCABULARY_SIZE)
    return oracle, DistilBertBackbone(**config), inputs


@pytest.mark.parametrize("name", list(CASES))
def test_matches_keras_hub(name):
    oracle, ours, inputs = make_pair(name)
    max_diff = assert_encoder_matches_oracle(ours, oracle, inputs)
    print(f"distil_bert {name}: max |ours - keras_hub| = {max_diff:.3e}")


def test_matches_keras_hub_where_the_epsilon_matters():
    oracle, ours, inputs = make_pair("heads12", embedding_scale=1e-5)
    max_diff = assert_encoder_matches_oracle(ours, oracle, inputs)
    print(f"distil_bert small embeddings: max diff = {max_diff:.3e}")


def test_training_mode_draws_dropout_masks():
    oracle, ours, inputs = make_pair("heads2")
    assert_dropout_in_training(ours, oracle, inputs)


def tanh_gelu(model):
    """BERT's activation instead of DistilBERT's exact GELU."""
    for block in model.transformer_layers:
        block.intermediate_dense.activation = functools.partial(
            keras.activations.gelu, approximate=True
        )


def roberta_epsilon(model):
    """RoBERTa's LayerNorm epsilon, 1e-5, instead of 1e-12."""
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.LayerNormalization):
            layer.epsilon = 1e-5


@pytest.mark.parametrize("mistake", [tanh_gelu, roberta_epsilon])
def test_the_comparison_detects_mistakes(mistake):
    """The check sees BERT's tanh GELU or RoBERTa's epsilon."""
    oracle, ours, inputs = make_pair("heads12", embedding_scale=1e-5)
    assert_encoder_matches_oracle(ours, oracle, inputs)
    mistake(ours)
    with pytest.raises(AssertionError):
        assert_outputs_close(ours(inputs), oracle(inputs))
