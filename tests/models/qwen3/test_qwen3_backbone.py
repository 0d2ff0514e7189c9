"""Qwen3Backbone: paths, shapes, presets, config round trip, window, errors."""

import keras
import numpy as np
import pytest

from keras_nlp.models.qwen3.qwen3_backbone import Qwen3Backbone

# head_dim * num_query_heads (64) differs from hidden_dim (32), as in
# qwen3_0.6b (16 * 128 on 1024).
TINY = dict(
    vocabulary_size=64,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    hidden_dim=32,
    intermediate_dim=40,
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1], [0, 0, 3, 4, 8]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], "int32"),
}
PRESET_PARAMS = {
    "qwen3_0.6b_en": 596_049_920,
    "qwen3_8b_en": 8_190_735_360,
}


@pytest.mark.parametrize("tied", [True, False])
def test_variable_paths_and_shapes(tied):
    model = Qwen3Backbone(**TINY, tie_word_embeddings=tied)
    expected = {"token_embedding/embeddings": (64, 32)}
    if not tied:
        expected["token_embedding/reverse_embeddings"] = (32, 64)
    for i in range(2):
        attention = f"transformer_layer_{i}/self_attention"
        block = f"transformer_layer_{i}"
        expected.update(
            {
                f"{attention}/query/kernel": (32, 4, 16),
                f"{attention}/query_dense_layernorm/scale": (16,),
                f"{attention}/key/kernel": (32, 2, 16),
                f"{attention}/key_dense_layernorm/scale": (16,),
                f"{attention}/value/kernel": (32, 2, 16),
                f"{attention}/attention_output/kernel": (4, 16, 32),
                f"{block}/self_attention_layernorm/scale": (32,),
                f"{block}/feedforward_intermediate_dense/kernel": (32, 40),
                f"{block}/feedforward_gate_dense/kernel": (32, 40),
                f"{block}/feedforward_output_dense/kernel": (40, 32),
                f"{block}/feedforward_layernorm/scale": (32,),
            }
        )
    expected["sequence_output_layernorm/scale"] = (32,)
    assert {v.path: tuple(v.shape) for v in model.weights} == expected
    assert model(INPUTS).shape == (2, 5, 32)


def test_head_dim_none_is_hidden_over_heads():
    model = Qwen3Backbone(**dict(TINY, head_dim=None))
    query = model.get_layer("transformer_layer_0").attention.query_dense
    assert tuple(query.kernel.shape) == (32, 4, 8)


@pytest.mark.parametrize("preset", list(PRESET_PARAMS))
def test_preset_parameter_count_matches_the_checkpoint(preset):
    plan = Qwen3Backbone.plan_layout({"batch": 1, "model": 1}, preset=preset)
    assert plan.total_params == PRESET_PARAMS[preset]


def test_qwen3_0_6b_shapes():
    plan = Qwen3Backbone.plan_layout(
        {"batch": 1, "model": 1}, preset="qwen3_0.6b_en"
    )
    attention = "transformer_layer_27/self_attention/"
    assert plan.weight(attention + "query/kernel").shape == (1024, 16, 128)
    assert plan.weight(attention + "key/kernel").shape == (1024, 8, 128)
    assert plan.weight(attention + "attention_output/kernel").shape == (
        16,
        128,
        1024,
    )
    assert plan.weight(attention + "query_dense_layernorm/scale").shape == (
        128,
    )
    paths = {w.path for w in plan.weights}
    assert "token_embedding/reverse_embeddings" not in paths
    assert not any(path.endswith("/bias") for path in paths)


def test_sliding_window_limits_what_a_token_sees():
    # With one layer, position t sees tokens t - window + 1 .. t only.
    config = dict(TINY, num_layers=1)
    windowed = Qwen3Backbone(**config, sliding_window_size=2)
    full = Qwen3Backbone(**config, sliding_window_size=None)
    full.set_weights(windowed.get_weights())
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7, 1]], "int32"),
        "padding_mask": np.ones((1, 5), "int32"),
    }
    changed = dict(inputs, token_ids=np.array([[6, 9, 2, 7, 1]], "int32"))

    def run(model, x):
        return keras.ops.convert_to_numpy(model(x))

    np.testing.assert_allclose(
        run(windowed, inputs)[:, 2:], run(windowed, changed)[:, 2:], atol=1e-6
    )
    assert (
        np.abs(run(full, inputs)[:, 4] - run(full, changed)[:, 4]).max() > 1e-4
    )


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="num_key_value_heads=3"):
        Qwen3Backbone(**dict(TINY, num_key_value_heads=3))
    with pytest.raises(ValueError, match="head_dim=7"):
        Qwen3Backbone(**dict(TINY, head_dim=7))
    with pytest.raises(ValueError, match="num_query_heads=3"):
        Qwen3Backbone(**dict(TINY, head_dim=None, num_query_heads=3))
    with pytest.raises(ValueError, match="sliding_window_size=0"):
        Qwen3Backbone(**dict(TINY, sliding_window_size=0))
