"""Phi3Backbone: paths, shapes, presets, config round trip, errors."""

import math

import numpy as np
import pytest
from keras import ops

from keras_nlp.models.phi3.phi3_backbone import Phi3Backbone
from keras_nlp.models.phi3.phi3_rotary_embedding import (
    Phi3SuScaledRotaryEmbedding,
)

TINY = dict(
    vocabulary_size=64,
    num_layers=2,
    hidden_dim=32,
    intermediate_dim=48,
    num_query_heads=4,
    num_key_value_heads=2,
)
# head_dim 8: four rotated pairs.
SU = dict(
    max_sequence_length=64,
    pretraining_sequence_length=4,
    rope_scaling_type="su",
    rope_scaling_short_factor=[1.0, 1.1, 1.2, 1.3],
    rope_scaling_long_factor=[1.0, 2.0, 4.0, 8.0],
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1], [0, 0, 3, 4, 8]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], "int32"),
}
PHI3_MINI_PARAMS = 3_821_079_552


def expected_paths(num_layers, V=64, H=32, Nq=4, Nkv=2, F=48):
    Dh = H // Nq
    paths = {
        "token_embedding/embeddings": (V, H),
        "token_embedding/reverse_embeddings": (H, V),
    }
    for i in range(num_layers):
        block = f"transformer_layer_{i}"
        paths.update(
            {
                f"{block}/pre_attention_layernorm/scale": (H,),
                f"{block}/attention/query/kernel": (H, Nq, Dh),
                f"{block}/attention/key/kernel": (H, Nkv, Dh),
                f"{block}/attention/value/kernel": (H, Nkv, Dh),
                f"{block}/attention/attention_output/kernel": (Nq, Dh, H),
                f"{block}/post_attention_layernorm/scale": (H,),
                f"{block}/feedforward_intermediate_dense/kernel": (H, F),
                f"{block}/feedforward_gate_dense/kernel": (H, F),
                f"{block}/feedforward_output_dense/kernel": (F, H),
            }
        )
    paths["sequence_output_layernorm/scale"] = (H,)
    return paths


def full_params(V, L, H, Nq, Nkv, F):
    Dh = H // Nq
    block = H * Dh * (2 * Nq + 2 * Nkv) + 3 * H * F + 2 * H
    return 2 * V * H + L * block + H


@pytest.mark.parametrize("su", [False, True])
def test_variable_paths_and_shapes(su):
    model = Phi3Backbone(**TINY, **(SU if su else {}))
    actual = {v.path: tuple(v.shape) for v in model.weights}
    assert actual == expected_paths(2)
    assert len(model.weights) == len(actual)
    assert model.count_params() == full_params(64, 2, 32, 4, 2, 48)
    assert tuple(model(INPUTS).shape) == (2, 5, 32)
    assert set(model.input) == {"token_ids", "padding_mask"}


def test_preset_parameter_count_and_shapes_without_allocating():
    plan = Phi3Backbone.plan_layout(
        {"batch": 1, "model": 1}, preset="phi3_mini_4k_instruct_en"
    )
    assert plan.total_params == PHI3_MINI_PARAMS
    assert full_params(32064, 32, 3072, 32, 32, 8192) == PHI3_MINI_PARAMS
    actual = {w.path: w.shape for w in plan.weights}
    assert actual == expected_paths(32, V=32064, H=3072, Nq=32, Nkv=32, F=8192)


def test_presets():
    # The 128k preset needs su factor lists keras-hub's metadata lacks.
    assert set(Phi3Backbone.presets) == {"phi3_mini_4k_instruct_en"}
    config = Phi3Backbone.presets["phi3_mini_4k_instruct_en"]
    assert config["rope_max_wavelength"] == 10000
    assert config["max_sequence_length"] == 4096
    assert config["pretraining_sequence_length"] == 4096
    assert "rope_scaling_type" not in config
    model = Phi3Backbone.from_preset(
        "phi3_mini_4k_instruct_en",
        load_weights=False,
        num_layers=1,
        vocabulary_size=128,
        hidden_dim=64,  # 32 heads of 2
        intermediate_dim=32,
    )
    assert model.num_query_heads == 32
    assert model.layer_norm_epsilon == 1e-5


@pytest.mark.parametrize(
    "override, words",
    [
        ({"num_query_heads": 5}, ["hidden_dim=32", "num_query_heads=5"]),
        ({"num_key_value_heads": 3}, ["num_key_value_heads=3"]),
        (
            {"hidden_dim": 36, "num_query_heads": 4},
            ["head_dim=9", "even"],
        ),
        ({"num_layers": 0}, ["num_layers=0", "positive integer"]),
        ({"vocabulary_size": 12.5}, ["vocabulary_size=12.5", "positive"]),
        (
            {"rope_scaling_type": "yarn"},
            ["rope_scaling_type='yarn'", "None", "'su'", "'longrope'"],
        ),
        (
            {"rope_scaling_type": "su"},
            ["rope_scaling_short_factor", "head_dim // 2 = 4", "None"],
        ),
        (
            dict(SU, rope_scaling_long_factor=[1.0, 2.0]),
            ["rope_scaling_long_factor", "head_dim // 2 = 4", "Received 2"],
        ),
        (
            {"pretraining_sequence_length": 0},
            ["pretraining_sequence_length=0", "positive integer"],
        ),
    ],
)
def test_invalid_arguments(override, words):
    with pytest.raises(ValueError) as error:
        Phi3Backbone(**{**TINY, **override})
    for word in words:
        assert word in str(error.value)


def test_training_with_dropout():
    model = Phi3Backbone(**TINY, dropout=0.3)
    train = ops.convert_to_numpy(model(INPUTS, training=True))
    infer = ops.convert_to_numpy(model(INPUTS, training=False))
    assert np.all(np.isfinite(train))
    assert not np.allclose(train, infer)


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


def test_su_rope_errors_and_config():
    with pytest.raises(ValueError, match="Received 2 and 1 entries"):
        Phi3SuScaledRotaryEmbedding([1.0, 1.0], [2.0])
    with pytest.raises(ValueError, match="head_dim 8"):
        rope_pair()(np.ones((1, 3, 1, 8), "float32"))
    rope = rope_pair()
    config = rope.get_config()
    assert config["short_factor"] == [1.0, 1.5]
    clone = Phi3SuScaledRotaryEmbedding.from_config(config)
    assert clone.get_config() == config
