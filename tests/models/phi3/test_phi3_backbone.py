"""Phi-3's su RoPE: factors switched past the pretraining length."""

import math

import numpy as np
import pytest
from keras import ops

from keras_nlp.models.phi3.phi3_rotary_embedding import (
    Phi3SuScaledRotaryEmbedding,
)


def rope_pair():
    return Phi3SuScaledRotaryEmbedding(
        short_factor=[1.0, 1.5],
        long_factor=[2.0, 4.0],
        max_sequence_length=64,
        pretraining_sequence_length=8,
    )


def test_su_rope_switches_factors_past_the_pretraining_length():
    rope = rope_pair()
    plain = np.array([1.0, 0.01])  # 10000 ** (-[0, 2] / 4)
    for length, factors in ((8, [1.0, 1.5]), (9, [2.0, 4.0])):
        positions = ops.arange(length, dtype="float32")[None]
        inverse = rope._context_inverse_frequency(
            ops.convert_to_tensor(plain, "float32"), positions
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(inverse), plain / factors, rtol=1e-6
        )
    # A decoding step at cache index 8 is the 9th token: long factors.
    inputs = np.ones((1, 1, 1, 4), "float32")
    at_8 = rope(inputs, start_index=8)
    angles = 8 * plain / [2.0, 4.0]
    amplitude = math.sqrt(1 + math.log(64 / 8) / math.log(8))
    cos, sin = np.cos(angles) * amplitude, np.sin(angles) * amplitude
    expected = np.concatenate([cos - sin, cos + sin])
    np.testing.assert_allclose(
        ops.convert_to_numpy(at_8)[0, 0, 0], expected, rtol=1e-5
    )


def test_su_rope_amplitude():
    assert rope_pair()._amplitude(3) == pytest.approx(
        math.sqrt(1 + math.log(8) / math.log(8))
    )
    same = Phi3SuScaledRotaryEmbedding([1.0], [2.0], 8, 8)
    assert same._amplitude(3) == 1.0


def test_su_rope_call_error_and_config():
    with pytest.raises(ValueError, match="head_dim 8"):
        rope_pair()(np.ones((1, 3, 1, 8), "float32"))
    rope = rope_pair()
    config = rope.get_config()
    assert config["short_factor"] == [1.0, 1.5]
    clone = Phi3SuScaledRotaryEmbedding.from_config(config)
    assert clone.get_config() == config
