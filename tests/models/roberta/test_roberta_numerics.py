"""Numerical parity of keras_nlp's RoBERTa with keras-hub's (the oracle)."""

import functools

import keras
import numpy as np
import pytest

import keras_nlp.models
from tests.models.backbone_checks import assert_dropout_in_training
from tests.models.backbone_checks import assert_encoder_matches_oracle
from tests.models.backbone_checks import assert_outputs_close
from tests.models.backbone_checks import random_inputs
from tests.models.backbone_checks import unit_scale_oracle

# name -> (num_heads, hidden_dim, intermediate_dim). The presets' 12 (base)
# and 16 (large) heads, and 2; an odd vocabulary like 50265.
CASES = {
    "heads2": (2, 32, 64),
    "heads12": (12, 48, 96),
    "heads16": (16, 64, 128),
}
VOCABULARY_SIZE = 97


def make_pair(
    name,
    seed=0,
    embedding_scale=None,
    backbone_name="RobertaBackbone",
    vocabulary_size=VOCABULARY_SIZE,
):
    """keras-hub's backbone with unit-scale random weights, ours, inputs.

    Unit-scale weights make attention far from uniform, so a wrong
    activation or position shows. `embedding_scale` shrinks the embedding
    tables so that the embeddings' LayerNorm epsilon matters.
    `backbone_name` is the class in both libraries (XLM-R reuses this).
    """
    num_heads, hidden_dim, intermediate_dim = CASES[name]
    config = dict(
        vocabulary_size=vocabulary_size,
        num_layers=2,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        max_sequence_length=16,
    )
    oracle = unit_scale_oracle(
        backbone_name,
        config,
        seed,
        scales={"embeddings/": embedding_scale} if embedding_scale else None,
    )
    inputs = random_inputs(vocabulary_size)
    return oracle, getattr(keras_nlp.models, backbone_name)(**config), inputs


@pytest.mark.parametrize("name", list(CASES))
def test_matches_keras_hub(name):
    oracle, ours, inputs = make_pair(name)
    max_diff = assert_encoder_matches_oracle(ours, oracle, inputs)
    print(f"roberta {name}: max |ours - keras_hub| = {max_diff:.3e}")


def test_matches_keras_hub_where_the_epsilon_matters():
    oracle, ours, inputs = make_pair("heads12", embedding_scale=1e-3)
    max_diff = assert_encoder_matches_oracle(ours, oracle, inputs)
    print(f"roberta small embeddings: max |ours - keras_hub| = {max_diff:.3e}")


def test_training_mode_draws_dropout_masks():
    oracle, ours, inputs = make_pair("heads2")
    assert_dropout_in_training(ours, oracle, inputs)


def tanh_gelu(model):
    """BERT's activation instead of RoBERTa's exact GELU."""
    for block in model.transformer_layers:
        block.intermediate_dense.activation = functools.partial(
            keras.activations.gelu, approximate=True
        )


def bert_epsilon(model):
    """BERT's LayerNorm epsilon, 1e-12, instead of RoBERTa's 1e-5."""
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.LayerNormalization):
            layer.epsilon = 1e-12


def hugging_face_positions(model):
    """Positions counted from 2 (Hugging Face's padding offset), not 0."""
    table = model.position_embedding.embeddings
    table.assign(np.roll(keras.ops.convert_to_numpy(table), -2, axis=0))


@pytest.mark.parametrize(
    "mistake", [tanh_gelu, bert_epsilon, hugging_face_positions]
)
def test_the_comparison_detects_mistakes(mistake):
    """The check sees BERT's GELU or epsilon, or shifted positions."""
    oracle, ours, inputs = make_pair("heads12", embedding_scale=1e-3)
    assert_encoder_matches_oracle(ours, oracle, inputs)
    mistake(ours)
    with pytest.raises(AssertionError):
        assert_outputs_close(ours(inputs), oracle(inputs))
