"""Numerical parity of keras_nlp's DeBERTaV3 with keras-hub's (the oracle)."""

import math

import keras
import numpy as np
import pytest
from keras_hub.src.models.deberta_v3.disentangled_self_attention import (
    DisentangledSelfAttention as OracleAttention,
)

from keras_nlp.models.deberta_v3 import disentangled_self_attention
from keras_nlp.models.deberta_v3.deberta_v3_backbone import DebertaV3Backbone
from keras_nlp.models.deberta_v3.disentangled_self_attention import (
    relative_position_index,
)
from tests.models.backbone_checks import assert_dropout_in_training
from tests.models.backbone_checks import assert_encoder_matches_oracle
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import random_inputs
from tests.models.backbone_checks import unit_scale_oracle

# name -> (num_heads, hidden_dim, max_sequence_length, bucket_size). The
# presets' 6 (extra_small) and 12 (base) heads. Inputs are 40 tokens, well
# past bucket_size: most offsets land in log buckets, and past
# max_sequence_length in "heads6" the farthest are clipped.
CASES = {
    "heads6": (6, 48, 16, 4),
    "heads12": (12, 96, 64, 8),
}
VOCABULARY_SIZE = 100
LENGTH = 40


def make_pair(name, seed=0):
    num_heads, hidden_dim, max_sequence_length, bucket_size = CASES[name]
    config = dict(
        vocabulary_size=VOCABULARY_SIZE,
        num_layers=2,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=64,
        max_sequence_length=max_sequence_length,
        bucket_size=bucket_size,
    )
    oracle = unit_scale_oracle("DebertaV3Backbone", config, seed)
    inputs = random_inputs(VOCABULARY_SIZE, batch=4, length=LENGTH)
    return oracle, DebertaV3Backbone(**config), inputs


@pytest.mark.parametrize("name", list(CASES))
def test_matches_keras_hub(name):
    oracle, ours, inputs = make_pair(name)
    max_diff = assert_encoder_matches_oracle(ours, oracle, inputs)
    print(f"deberta_v3 {name}: max |ours - keras_hub| = {max_diff:.3e}")


@pytest.mark.parametrize(
    "bucket_size, max_sequence_length, length",
    [(256, 512, 700), (4, 16, LENGTH), (8, 64, LENGTH)],
)
def test_relative_buckets_equal_keras_hub(
    bucket_size, max_sequence_length, length
):
    """Every (query, key) pair reads the same table row, the presets' too."""
    oracle = OracleAttention(
        num_heads=1,
        hidden_dim=4,
        max_position_embeddings=max_sequence_length,
        bucket_size=bucket_size,
    )
    offsets = keras.ops.convert_to_numpy(oracle._get_rel_pos(length))[0, 0]
    expected = np.clip(offsets + bucket_size, 0, 2 * bucket_size - 1)
    actual = keras.ops.convert_to_numpy(
        relative_position_index(length, bucket_size, max_sequence_length)
    )
    np.testing.assert_array_equal(actual, expected)
    # Log buckets in use: fewer distinct rows than offsets.
    assert len(np.unique(actual)) < 2 * length - 1


def test_training_mode_draws_dropout_masks():
    oracle, ours, inputs = make_pair("heads6")
    assert_dropout_in_training(ours, oracle, inputs)


def tanh_gelu(model, monkeypatch):
    for block in model.transformer_layers:
        block.intermediate_dense.activation = lambda x: keras.activations.gelu(
            x, approximate=True
        )


def plain_attention_scale(model, monkeypatch):
    # 1 / sqrt(head_dim), as in BERT, instead of 1 / sqrt(3 * head_dim).
    for block in model.transformer_layers:
        block.mixing.scale = 1.0 / math.sqrt(block.mixing.head_dim)


def offsets_reversed(model, monkeypatch):
    # Key minus query instead of query minus key.
    index = relative_position_index
    monkeypatch.setattr(
        disentangled_self_attention,
        "relative_position_index",
        lambda *args: keras.ops.transpose(index(*args)),
    )


def far_buckets_span_twice_the_length(model, monkeypatch):
    # Log buckets reaching the last one at twice max_sequence_length.
    for block in model.transformer_layers:
        block.mixing.max_sequence_length *= 2


@pytest.mark.parametrize(
    "mistake",
    [
        tanh_gelu,
        plain_attention_scale,
        offsets_reversed,
        far_buckets_span_twice_the_length,
    ],
)
def test_the_comparison_detects_mistakes(mistake, monkeypatch):
    """The check sees a wrong activation, scale, offset sign or bucket."""
    oracle, ours, inputs = make_pair("heads6")
    assert_encoder_matches_oracle(ours, oracle, inputs)
    mistake(ours, monkeypatch)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(
            output_arrays(ours(inputs))["sequence_output"],
            output_arrays(oracle(inputs))["sequence_output"],
            atol=1e-5,
        )
