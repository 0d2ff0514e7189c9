"""Numerical parity of keras_nlp's Falcon with keras-hub's (the oracle)."""

import keras
import keras_hub
import numpy as np
import pytest
from keras_hub.src.models.falcon.falcon_transformer_decoder import (
    FalconTransformerDecoder,
)

from keras_nlp.layers.cached_attention import alibi_slopes
from keras_nlp.models.falcon.falcon_backbone import FalconBackbone
from tests.models.backbone_checks import assert_matches_oracle
from tests.models.backbone_checks import random_inputs

VOCAB = 97
BASE = dict(vocabulary_size=VOCAB, num_layers=2, hidden_dim=48)
# name -> (num_attention_heads, other options). 1, 2, 4 and 8 heads take
# ALiBi's power-of-two slopes; 3 and 6 heads take the interleaved ones.
CASES = {
    "heads1": (1, {}),
    "heads2": (2, {}),
    "heads3": (3, {}),
    "heads4": (4, {}),
    "heads6": (6, {}),
    "heads8": (8, {}),
    "heads6_dropout": (
        6,
        dict(attention_dropout_rate=0.1, feedforward_dropout_rate=0.2),
    ),
}


def make_config(name):
    num_heads, options = CASES[name]
    return dict(
        BASE, num_attention_heads=num_heads, intermediate_dim=96, **options
    )


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
    oracle = keras_hub.models.FalconBackbone(**config)
    sharpen(oracle, seed)
    return oracle, FalconBackbone(**config)


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


def test_matches_keras_hub_with_right_padding():
    # keras-hub counts ALiBi positions over real tokens only; with left or
    # right padding that differs from ours by a constant per query.
    oracle, ours = make_pair(make_config("heads6"))
    inputs = random_inputs(VOCAB)
    inputs["padding_mask"][1, -4:] = 0
    inputs["token_ids"][1, -4:] = 0
    assert_matches_oracle(ours, oracle, inputs)


def test_matches_keras_hub_with_another_epsilon():
    # keras-hub's backbone gives `layer_norm_epsilon` to the final norm
    # only; its blocks keep 1e-5. Ours uses it everywhere, so set the
    # oracle's block norms to it before comparing.
    config = dict(make_config("heads4"), layer_norm_epsilon=0.5)
    oracle, ours = make_pair(config)
    for block in oracle.transformer_layers:
        block.input_layernorm.epsilon = 0.5
        block.post_attention_layernorm.epsilon = 0.5
    assert_matches_oracle(ours, oracle, random_inputs(VOCAB))


@pytest.mark.parametrize("num_heads", [1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32])
def test_alibi_slopes_match_keras_hub(num_heads):
    decoder = FalconTransformerDecoder(num_heads, 16)
    expected = decoder._get_slopes(num_heads)
    np.testing.assert_allclose(alibi_slopes(num_heads), expected, rtol=1e-7)


def test_the_comparison_detects_unscaled_alibi():
    """Falcon adds ALiBi before the 1 / sqrt(head_dim) scaling."""
    oracle, ours = make_pair(make_config("heads6"))
    for block in ours.transformer_layers:
        assert block.attention.scale_alibi
        block.attention.scale_alibi = False
    with pytest.raises(AssertionError):
        assert_matches_oracle(ours, oracle, random_inputs(VOCAB))


def test_the_comparison_detects_a_wrong_gelu():
    oracle, ours = make_pair(make_config("heads4"))
    for block in ours.transformer_layers:
        block._activation = lambda x: keras.activations.gelu(
            x, approximate=True
        )
    with pytest.raises(AssertionError):
        assert_matches_oracle(ours, oracle, random_inputs(VOCAB))


def test_the_comparison_detects_a_parallel_residual():
    oracle, ours = make_pair(make_config("heads4"))
    for block in ours.transformer_layers:
        block.parallel_residual = True
    with pytest.raises(AssertionError):
        assert_matches_oracle(ours, oracle, random_inputs(VOCAB))
