"""Llama 3.1's RoPE scaling bands."""

import keras
import numpy as np

from keras_nlp.models.llama.llama_rotary_embedding import LlamaRotaryEmbedding


def test_llama3_rope_scaling_bands():
    # head_dim 64, base 10000: wavelengths 2*pi*10000**(k/32), k = 0..31.
    rope = LlamaRotaryEmbedding(
        frequency_adjustment_factor=8.0,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
        pretraining_sequence_length=64,
    )
    plain = keras.ops.convert_to_numpy(
        super(LlamaRotaryEmbedding, rope)._inverse_frequency(64)
    )
    scaled = keras.ops.convert_to_numpy(rope._inverse_frequency(64))
    wavelength = 2 * np.pi / plain
    fast = wavelength < 64 / 4
    slow = wavelength > 64 / 1
    assert fast.any() and slow.any() and (~fast & ~slow).any()
    np.testing.assert_allclose(scaled[fast], plain[fast])
    np.testing.assert_allclose(scaled[slow], plain[slow] / 8.0, rtol=1e-6)
    middle = ~fast & ~slow
    assert np.all(scaled[middle] < plain[middle])
    assert np.all(scaled[middle] > plain[middle] / 8.0)
