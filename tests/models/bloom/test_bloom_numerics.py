"""Numerical parity of keras_nlp's BLOOM with keras-hub's (the oracle)."""

import keras
import keras_hub
import numpy as np
import pytest
from keras_hub.layers import AlibiBias

from keras_nlp.layers import cached_attention
from keras_nlp.layers.cached_attention import alibi_slopes
from keras_nlp.models.bloom.bloom_backbone import BloomBackbone
from tests.models.backbone_checks import assert_matches_oracle
from tests.models.backbone_checks import random_inputs

VOCAB = 97
BASE = dict(vocabulary_size=VOCAB, num_layers=2, hidden_dim=48)
# name -> (num_heads, other options). 1, 2, 4 and 8 heads take ALiBi's
# power-of-two slopes; 3 and 6 heads take the interleaved ones.
CASES = {
    "heads1": (1, {}),
    "heads2": (2, {}),
    "heads3": (3, {}),
    "heads4": (4, {}),
    "heads6": (6, {}),
    "heads8": (8, {}),
    "heads6_options": (6, dict(dropout=0.1, layer_norm_epsilon=1e-3)),
}


def make_config(name):
    num_heads, options = CASES[name]
    return dict(BASE, num_heads=num_heads, intermediate_dim=96, **options)


def sharpen(model, seed=0):
    """Gives every kernel unit-scale outputs so attention is far from flat.

    With small initial weights the logits are tiny and a wrong ALiBi slope
    changes the outputs by less than the tolerance.
    """
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if variable.path.endswith(("/kernel", "/embeddings")):
            fan_in = variable.shape[0]
            scale = 1.0 if variable.path.endswith("embeddings") else fan_in
            value = rng.normal(0.0, scale**-0.5, variable.shape)
            variable.assign(value.astype("float32"))


def make_pair(config, seed=0):
    keras.utils.set_random_seed(seed)
    oracle = keras_hub.models.BloomBackbone(**config)
    sharpen(oracle, seed)
    return oracle, BloomBackbone(**config)


@pytest.mark.parametrize("name", list(CASES))
def test_matches_keras_hub(name):
    oracle, ours = make_pair(make_config(name))
    inputs = random_inputs(VOCAB)
    max_diff = assert_matches_oracle(ours, oracle, inputs)
    print(f"{name}: max |ours - keras_hub| = {max_diff:.3e}")
    # The tied embedding projects back to the same vocabulary logits.
    hidden = ours(inputs)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(ours.token_embedding(hidden, reverse=True)),
        keras.ops.convert_to_numpy(
            oracle.token_embedding(hidden, reverse=True)
        ),
        atol=1e-5,
    )


@pytest.mark.parametrize("num_heads", [1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32])
def test_alibi_slopes_match_keras_hub(num_heads):
    expected = AlibiBias()._get_slopes(num_heads)
    np.testing.assert_allclose(alibi_slopes(num_heads), expected, rtol=1e-7)


def swap_activation(model, approximate):
    for block in model.transformer_layers:
        block._activation = lambda x: keras.activations.gelu(
            x, approximate=approximate
        )


def test_the_comparison_detects_a_wrong_gelu():
    oracle, ours = make_pair(make_config("heads4"))
    swap_activation(ours, approximate=False)
    with pytest.raises(AssertionError):
        assert_matches_oracle(ours, oracle, random_inputs(VOCAB))


def test_the_comparison_detects_missing_alibi():
    oracle, ours = make_pair(make_config("heads6"))
    for block in ours.transformer_layers:
        block.attention.use_alibi = False
    with pytest.raises(AssertionError):
        assert_matches_oracle(ours, oracle, random_inputs(VOCAB))


def test_the_comparison_detects_slopes_in_the_wrong_head_order(monkeypatch):
    oracle, ours = make_pair(make_config("heads6"))
    monkeypatch.setattr(
        cached_attention,
        "alibi_slopes",
        lambda num_heads: alibi_slopes(num_heads)[::-1],
    )
    with pytest.raises(AssertionError):
        assert_matches_oracle(ours, oracle, random_inputs(VOCAB))
