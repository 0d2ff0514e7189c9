"""LlamaBackbone: paths, shapes, presets, config round trip, errors."""

import keras
import numpy as np
import pytest

from keras_nlp.models.llama.llama_backbone import LlamaBackbone
from keras_nlp.models.llama.llama_rotary_embedding import LlamaRotaryEmbedding

TINY = dict(
    vocabulary_size=64,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=48,
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1], [0, 0, 3, 4, 8]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], "int32"),
}


@pytest.mark.parametrize("tied", [False, True])
def test_variable_paths_and_shapes(tied):
    model = LlamaBackbone(**TINY, tie_word_embeddings=tied)
    expected = {"token_embedding/embeddings": (64, 32)}
    if not tied:
        expected["token_embedding/reverse_embeddings"] = (32, 64)
    for i in range(2):
        block = f"transformer_layer_{i}"
        expected.update(
            {
                f"{block}/self_attention/query/kernel": (32, 4, 8),
                f"{block}/self_attention/key/kernel": (32, 2, 8),
                f"{block}/self_attention/value/kernel": (32, 2, 8),
                f"{block}/self_attention/attention_output/kernel": (4, 8, 32),
                f"{block}/self_attention_layernorm/scale": (32,),
                f"{block}/feedforward_intermediate_dense/kernel": (32, 48),
                f"{block}/feedforward_gate_dense/kernel": (32, 48),
                f"{block}/feedforward_output_dense/kernel": (48, 32),
                f"{block}/feedforward_layernorm/scale": (32,),
            }
        )
    expected["sequence_output_layernorm/scale"] = (32,)
    assert {v.path: tuple(v.shape) for v in model.weights} == expected
    assert model(INPUTS).shape == (2, 5, 32)


def test_preset_parameter_count_matches_the_checkpoint():
    plan = LlamaBackbone.plan_layout(
        {"batch": 1, "model": 1}, preset="llama2_7b_en"
    )
    assert plan.total_params == 6_738_415_616
    assert plan.weight(
        "transformer_layer_31/self_attention/query/kernel"
    ).shape == (4096, 32, 128)


def test_bad_head_counts_are_named():
    with pytest.raises(ValueError, match="num_query_heads=5"):
        LlamaBackbone(**dict(TINY, num_query_heads=5))
    with pytest.raises(ValueError, match="num_key_value_heads=3"):
        LlamaBackbone(**dict(TINY, num_key_value_heads=3))


def test_llama3_rope_scaling_needs_all_four_factors():
    with pytest.raises(ValueError, match="missing \\['high_freq_factor'"):
        LlamaRotaryEmbedding(
            frequency_adjustment_factor=8.0,
            low_freq_factor=1.0,
            pretraining_sequence_length=16,
        )


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
