"""Phi3Backbone and its su RoPE equal keras-hub's (the oracle)."""

import keras
import keras_hub
import numpy as np
import pytest
from keras_hub.src.models.phi3.phi3_rotary_embedding import (
    Phi3SuScaledRotaryEmbedding as HubSuRotaryEmbedding,
)

from keras_nlp.models.phi3.phi3_backbone import Phi3Backbone
from keras_nlp.models.phi3.phi3_rotary_embedding import (
    Phi3SuScaledRotaryEmbedding,
)
from tests.models.backbone_checks import assert_matches_oracle
from tests.models.backbone_checks import random_inputs

VOCAB = 100
HEADS = {"mha_4_4": (4, 4), "gqa_8_2": (8, 2), "mqa_8_1": (8, 1)}
# head_dim 64 / 8 = 8 (four pairs) or 64 / 4 = 16 (eight pairs). A tiny
# pretraining length puts the 6-token inputs below it, the 20-token ones
# above it (long factors) and the 10-token ones exactly at it.
PRETRAINING_LENGTH = 10


def su_options(num_query_heads, max_sequence_length=64):
    pairs = 64 // num_query_heads // 2
    return dict(
        max_sequence_length=max_sequence_length,
        pretraining_sequence_length=PRETRAINING_LENGTH,
        rope_scaling_type="su",
        rope_scaling_short_factor=[1.0 + 0.25 * k for k in range(pairs)],
        rope_scaling_long_factor=[1.0 + 3.0 * k for k in range(pairs)],
    )


def make_config(heads, options):
    num_query_heads, num_key_value_heads = HEADS[heads]
    return dict(
        vocabulary_size=VOCAB,
        num_layers=2,
        hidden_dim=64,
        intermediate_dim=96,
        num_query_heads=num_query_heads,
        num_key_value_heads=num_key_value_heads,
        **options,
    )


def sharpen(model, seed=0):
    """Unit-scale kernels: attention far from flat, so RoPE errors show.

    With the 0.02 initializer the attention logits are tiny and a wrong
    rotation changes the outputs by less than the tolerance.
    """
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if variable.path.endswith(("/kernel", "embeddings")):
            fan_in = 1 if variable.path.endswith("/embeddings") else None
            fan_in = fan_in or int(np.prod(variable.shape[:1]))
            value = rng.normal(0.0, fan_in**-0.5, variable.shape)
            variable.assign(value.astype("float32"))


def make_pair(config, oracle_config=None):
    keras.utils.set_random_seed(0)
    oracle = keras_hub.models.Phi3Backbone(**(oracle_config or config))
    sharpen(oracle)
    return Phi3Backbone(**config), oracle


# name -> (options for a head layout, input lengths). Plain RoPE does not
# care about the length; su is checked below, at and above the switch.
CASES = {
    "plain": (lambda heads: {}, [12]),
    "plain_options": (
        lambda heads: dict(
            layer_norm_epsilon=1e-5, rope_max_wavelength=500, dropout=0.1
        ),
        [12],
    ),
    "su": (lambda heads: su_options(HEADS[heads][0]), [6, 10, 20]),
    # max_sequence_length <= pretraining length: cos/sin amplitude 1.
    "su_amplitude_1": (
        lambda heads: su_options(HEADS[heads][0], 10),
        [6, 20],
    ),
}
# Every head layout with plain RoPE; the RoPE variants on the first one
# (they act per head, whatever the layout).
PARAMS = [
    (heads, name)
    for heads in HEADS
    for name in CASES
    if name == "plain" or heads == next(iter(HEADS))
]


@pytest.mark.parametrize(
    "heads, case", PARAMS, ids=[f"{h}-{c}" for h, c in PARAMS]
)
def test_outputs_equal_keras_hub(heads, case):
    options, lengths = CASES[case]
    ours, oracle = make_pair(make_config(heads, options(heads)))
    # One pair for every length: building it costs more than a call.
    for length in lengths:
        inputs = random_inputs(VOCAB, batch=3, length=length)
        diff = assert_matches_oracle(ours, oracle, inputs)
        print(f"{heads} {case} len={length}: max |diff| = {diff:.2e}")


@pytest.mark.parametrize("length", [6, 20])
def test_traced_predict_equals_keras_hub(length):
    """Compiled (jit / tf.function) calls pick the right factors too."""
    config = make_config("gqa_8_2", su_options(8))
    ours, oracle = make_pair(config)
    inputs = random_inputs(VOCAB, batch=3, length=length)
    assert_matches_oracle(ours, oracle, inputs)
    expected = oracle.predict(inputs, verbose=0)
    actual = ours.predict(inputs, verbose=0)
    # A padded query attends to no key: only real tokens are defined.
    real = inputs["padding_mask"].astype(bool)
    np.testing.assert_allclose(
        actual[real], expected[real], atol=1e-5, rtol=1e-5
    )


def test_longrope_alias_is_su():
    config = make_config("gqa_8_2", su_options(8))
    ours, oracle = make_pair(
        dict(config, rope_scaling_type="longrope"), oracle_config=config
    )
    assert_matches_oracle(ours, oracle, random_inputs(VOCAB, length=20))


@pytest.mark.parametrize(
    "length, swapped",
    [(6, "rope_scaling_short_factor"), (20, "rope_scaling_long_factor")],
)
def test_the_comparison_sees_the_factor_in_use(length, swapped):
    """Breaking only the factors the length should use breaks parity."""
    config = make_config("gqa_8_2", su_options(8))
    wrong = dict(config, **{swapped: [1.0, 1.0, 1.0, 1.0]})
    ours, oracle = make_pair(wrong, oracle_config=config)
    with pytest.raises(AssertionError):
        assert_matches_oracle(
            ours, oracle, random_inputs(VOCAB, batch=3, length=length)
        )


@pytest.mark.parametrize("start_index", [0, 5, 9, 10, 30])
@pytest.mark.parametrize("seq_len", [1, 4])
def test_su_rotary_embedding_equals_keras_hub(start_index, seq_len):
    """Cached decoding: the factors follow the cache index."""
    short, long = [1.0, 1.3, 1.7, 2.0], [1.0, 4.0, 9.0, 16.0]
    ours = Phi3SuScaledRotaryEmbedding(
        short_factor=short,
        long_factor=long,
        max_sequence_length=128,
        pretraining_sequence_length=PRETRAINING_LENGTH,
        max_wavelength=100,
    )
    oracle = HubSuRotaryEmbedding(
        inverese_freq_short_factor=short,
        inverese_freq_long_factor=long,
        max_sequence_length=128,
        pretraining_sequence_length=PRETRAINING_LENGTH,
        max_wavelength=100,
    )
    x = np.random.default_rng(0).normal(size=(2, seq_len, 3, 8))
    x = x.astype("float32")
    index = keras.ops.convert_to_tensor(start_index, "int32")
    expected = keras.ops.convert_to_numpy(oracle(x, start_index=index))
    actual = keras.ops.convert_to_numpy(ours(x, start_index=index))
    np.testing.assert_allclose(actual, expected, atol=1e-6, rtol=1e-6)
