"""Gated DeltaNet: the chunked delta rule equals the token-by-token one."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_nlp.layers import gated_delta_net
from keras_nlp.layers.gated_delta_net import GatedDeltaNet
from keras_nlp.layers.gated_delta_net import chunked_gated_delta_rule
from keras_nlp.layers.gated_delta_net import gated_delta_rule

BATCH = 2
LENGTH = 70
HEADS = 2
KEY_DIM = 4
VALUE_DIM = 3
# Float32 rounding of a few dozen products and sums.
TOLERANCE = 2e-5


def numpy(x):
    return ops.convert_to_numpy(x)


def compiled(function, static_argnames=()):
    """`function` inside `jax.jit` or `tf.function`, as a model runs it:
    one program to compile per chunk size, where eager JAX compiles every
    op of it for each new shape."""
    if keras.backend.backend() == "jax":
        import jax

        return jax.jit(function, static_argnames=static_argnames)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.function(function)
    return function


chunked = compiled(chunked_gated_delta_rule, static_argnames="chunk_size")


def _normalized(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def delta_inputs(
    key_heads=HEADS,
    decays=(-1.0, 0.0),
    initial_state=False,
    padding=None,
    repeated_key=False,
    seed=0,
):
    """`(query, key, value, decay, beta, state)` and a mask, as the layer
    makes them: unit keys, queries scaled by `KEY_DIM ** -0.5`, keys and
    queries repeated over groups of value heads. Every case has the same
    shapes, so the token loop (run eagerly) compiles once for all."""
    rng = np.random.default_rng(seed)
    shape = (BATCH, LENGTH, key_heads, KEY_DIM)
    query = _normalized(rng.normal(size=shape)) * KEY_DIM**-0.5
    key = _normalized(rng.normal(size=shape))
    if repeated_key:
        key[:] = key[:, :1]
    query = np.repeat(query, HEADS // key_heads, axis=2)
    key = np.repeat(key, HEADS // key_heads, axis=2)
    value = rng.normal(size=(BATCH, LENGTH, HEADS, VALUE_DIM))
    decay = rng.uniform(*decays, size=(BATCH, LENGTH, HEADS))
    beta = rng.uniform(size=(BATCH, LENGTH, HEADS))
    if repeated_key:
        beta = 1.0 - beta * 1e-3
    state = np.zeros((BATCH, HEADS, KEY_DIM, VALUE_DIM))
    if initial_state:
        state = rng.normal(size=state.shape)
    mask = None
    if padding is not None:
        # Row 0 padded on the side named, by 3 tokens; row 1 unpadded.
        mask = np.ones((BATCH, LENGTH), "int32")
        if padding == "left":
            mask[0, :3] = 0
        else:
            mask[0, -3:] = 0
    arrays = [
        x.astype("float32") for x in (query, key, value, decay, beta, state)
    ]
    return arrays, mask


# name: (inputs options, chunk size), over LENGTH = 70 tokens.
CASES = {
    "longer_chunks_than_the_sequence": ({}, 100),
    "one_chunk_as_long_as_the_sequence": ({}, 70),
    "default_size_not_a_multiple": ({}, 64),
    "whole_chunks": ({}, 7),
    "chunks_of_one_token": ({}, 1),
    "not_a_multiple": ({}, 8),
    "grouped_heads": (dict(key_heads=1), 8),
    "initial_state": (dict(initial_state=True), 8),
    "right_padding": (dict(padding="right", initial_state=True), 8),
    "left_padding": (dict(padding="left", initial_state=True), 8),
    # exp(g) down to 1e-13 a token: the cumulative decays of a chunk
    # underflow, and an exp(G_t - G_s) taken above the diagonal would
    # overflow.
    "large_decays": (dict(decays=(-30.0, -5.0), initial_state=True), 8),
    "no_decay": (dict(decays=(0.0, 0.0), initial_state=True), 8),
    # One key written over and over with beta ~1 and no decay: every
    # entry of the triangular system below the diagonal is ~1. Its
    # inverse is about I minus the first subdiagonal, but powers of its
    # lower part grow like binomial coefficients (C(64, 32) ~ 2e18): an
    # inverse formed from them would lose every digit.
    "one_key_rewritten": (
        dict(decays=(0.0, 0.0), repeated_key=True, initial_state=True),
        64,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_chunked_rule_equals_the_token_by_token_rule(name):
    options, chunk_size = CASES[name]
    arrays, mask = delta_inputs(**options)
    expected_outputs, expected_state = gated_delta_rule(*arrays, mask=mask)
    outputs, state = chunked(*arrays, mask=mask, chunk_size=chunk_size)
    assert outputs.shape == expected_outputs.shape
    assert state.shape == expected_state.shape
    outputs_error = np.abs(numpy(outputs) - numpy(expected_outputs)).max()
    state_error = np.abs(numpy(state) - numpy(expected_state)).max()
    assert outputs_error < TOLERANCE, outputs_error
    assert state_error < TOLERANCE, state_error
    assert np.abs(numpy(state)).max() > 0.1  # not a trivial state


def recurrence_in_float64(query, key, value, decay, beta, state):
    """The gated delta rule in numpy float64, token by token."""
    query, key, value, decay, beta, state = (
        np.asarray(x, "float64")
        for x in (query, key, value, decay, beta, state)
    )
    outputs = np.zeros(value.shape)
    for t in range(value.shape[1]):
        state = state * np.exp(decay[:, t, :, None, None])
        recalled = np.einsum("bhk,bhkv->bhv", key[:, t], state)
        written = (value[:, t] - recalled) * beta[:, t, :, None]
        state = state + key[:, t, :, :, None] * written[:, :, None, :]
        outputs[:, t] = np.einsum("bhk,bhkv->bhv", query[:, t], state)
    return outputs, state


@pytest.mark.parametrize("seed", [0, 1])
def test_chunked_rule_rounds_no_worse_than_the_token_loop(seed):
    """Decays down to -3 a token: 64-token chunks reach G ~ -100, where
    exp(G_t - G_s) taken from a difference of cumulative sums loses 1e-5
    and its outputs stray ~1.5e-6 from float64 (the token loop ~1e-7)."""
    arrays, _ = delta_inputs(decays=(-3.0, 0.0), initial_state=True, seed=seed)
    expected_outputs, expected_state = recurrence_in_float64(*arrays)
    outputs, state = chunked(*arrays, chunk_size=64)
    token_outputs, _ = gated_delta_rule(*arrays)
    token_error = np.abs(numpy(token_outputs) - expected_outputs).max()
    outputs_error = np.abs(numpy(outputs) - expected_outputs).max()
    assert token_error < 5e-7
    assert outputs_error < 5e-7, outputs_error
    assert np.abs(numpy(state) - expected_state).max() < 5e-7


def test_left_padding_changes_no_real_output_or_the_state():
    """Row 0: three pad tokens, then the first 67 tokens of row 1, which
    ends with three pad tokens: the chunk boundaries fall three tokens
    apart in the two rows, and the state passes the pads unchanged."""
    arrays, _ = delta_inputs(initial_state=True)
    for x in arrays[:5]:
        x[0, 3:] = x[1, :-3]
    arrays[5][0] = arrays[5][1]
    mask = np.ones((BATCH, LENGTH), "int32")
    mask[0, :3] = 0
    mask[1, -3:] = 0
    outputs, state = chunked(*arrays, mask=mask, chunk_size=8)
    outputs, state = numpy(outputs), numpy(state)
    np.testing.assert_allclose(outputs[0, 3:], outputs[1, :-3], atol=TOLERANCE)
    np.testing.assert_allclose(state[0], state[1], atol=TOLERANCE)


def test_layer_prefill_by_chunks_equals_token_by_token(monkeypatch):
    layer = GatedDeltaNet(16, 1, 2, 8, 8)
    rng = np.random.default_rng(1)
    inputs = rng.normal(size=(2, 9, 16)).astype("float32")
    mask = np.ones((2, 9), "int32")
    mask[0, :2] = 0
    layer.build(inputs.shape)
    cache = [np.zeros(shape, "float32") for shape in layer.cache_shapes(2)]

    def call(inputs, mask, cache):
        # Traced anew for each function: it reads the module's attribute.
        return compiled(lambda x, m, c: layer(x, padding_mask=m, cache=c))(
            inputs, mask, cache
        )

    outputs, (conv_state, state) = call(inputs, mask, cache)
    monkeypatch.setattr(
        gated_delta_net, "chunked_gated_delta_rule", gated_delta_rule
    )
    expected, (expected_conv_state, expected_state) = call(inputs, mask, cache)

    def no_chunks(*args, **kwargs):
        raise AssertionError("a single token went by chunks")

    # The next decoding step (one token) goes token by token.
    monkeypatch.setattr(gated_delta_net, "chunked_gated_delta_rule", no_chunks)
    real = np.ones((2, 1), "int32")
    step, _ = call(inputs[:, :1], real, (conv_state, state))
    expected_step, _ = call(
        inputs[:, :1], real, (expected_conv_state, expected_state)
    )
    for actual, wanted in (
        (outputs, expected),
        (state, expected_state),
        (step, expected_step),
    ):
        np.testing.assert_allclose(numpy(actual), numpy(wanted), atol=TOLERANCE)
    assert np.abs(numpy(state)).max() > 0.01
    assert np.abs(numpy(outputs)).max() > 0.01
