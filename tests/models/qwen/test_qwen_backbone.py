"""QwenBackbone: paths, shapes, presets, config round trip, window, errors."""

import keras
import numpy as np
import pytest

from keras_nlp.models.qwen.qwen_backbone import QwenBackbone

TINY = dict(
    vocabulary_size=64,
    num_layers=2,
    num_query_heads=6,
    num_key_value_heads=2,
    hidden_dim=48,
    intermediate_dim=40,
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1], [0, 0, 3, 4, 8]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], "int32"),
}
# Full-model parameter counts of the keras-hub checkpoints. keras-hub's
# metadata for qwen2.5_7b_en says 6,993,420,288; its Hugging Face config
# (the one here) has 7,615,616,512.
PRESET_PARAMS = {
    "qwen2.5_0.5b_en": 494_032_768,
    "qwen2.5_3b_en": 3_085_938_688,
    "qwen2.5_7b_en": 7_615_616_512,
}


@pytest.mark.parametrize("tied", [True, False])
def test_variable_paths_and_shapes(tied):
    model = QwenBackbone(**TINY, tie_word_embeddings=tied)
    expected = {"token_embedding/embeddings": (64, 48)}
    if not tied:
        expected["token_embedding/reverse_embeddings"] = (48, 64)
    for i in range(2):
        attention = f"transformer_layer_{i}/self_attention"
        block = f"transformer_layer_{i}"
        expected.update(
            {
                f"{attention}/query/kernel": (48, 6, 8),
                f"{attention}/query/bias": (6, 8),
                f"{attention}/key/kernel": (48, 2, 8),
                f"{attention}/key/bias": (2, 8),
                f"{attention}/value/kernel": (48, 2, 8),
                f"{attention}/value/bias": (2, 8),
                # No bias on the output projection.
                f"{attention}/attention_output/kernel": (6, 8, 48),
                f"{block}/self_attention_layernorm/scale": (48,),
                f"{block}/feedforward_intermediate_dense/kernel": (48, 40),
                f"{block}/feedforward_gate_dense/kernel": (48, 40),
                f"{block}/feedforward_output_dense/kernel": (40, 48),
                f"{block}/feedforward_layernorm/scale": (48,),
            }
        )
    expected["sequence_output_layernorm/scale"] = (48,)
    assert {v.path: tuple(v.shape) for v in model.weights} == expected
    assert model(INPUTS).shape == (2, 5, 48)


@pytest.mark.parametrize("preset", list(PRESET_PARAMS))
def test_preset_parameter_count_matches_the_checkpoint(preset):
    plan = QwenBackbone.plan_layout({"batch": 1, "model": 1}, preset=preset)
    assert plan.total_params == PRESET_PARAMS[preset]


def test_qwen2_5_0_5b_shapes():
    plan = QwenBackbone.plan_layout(
        {"batch": 1, "model": 1}, preset="qwen2.5_0.5b_en"
    )
    attention = "transformer_layer_23/self_attention/"
    assert plan.weight(attention + "query/kernel").shape == (896, 14, 64)
    assert plan.weight(attention + "query/bias").shape == (14, 64)
    assert plan.weight(attention + "key/bias").shape == (2, 64)
    assert plan.weight("token_embedding/embeddings").shape == (151936, 896)
    paths = {w.path for w in plan.weights}
    assert "token_embedding/reverse_embeddings" not in paths


def test_sliding_window_limits_what_a_token_sees():
    # With one layer, position t sees tokens t - window + 1 .. t only.
    config = dict(TINY, num_layers=1)
    windowed = QwenBackbone(
        **config, use_sliding_window_attention=True, sliding_window_size=2
    )
    full = QwenBackbone(**config)
    full.set_weights(windowed.get_weights())
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7, 1]], "int32"),
        "padding_mask": np.ones((1, 5), "int32"),
    }
    changed = {
        "token_ids": np.array([[6, 9, 2, 7, 1]], "int32"),
        "padding_mask": inputs["padding_mask"],
    }

    def run(model, x):
        return keras.ops.convert_to_numpy(model(x))

    # Position 4 attends to 3 and 4 only: token 0 does not reach it.
    np.testing.assert_allclose(
        run(windowed, inputs)[:, 2:], run(windowed, changed)[:, 2:], atol=1e-6
    )
    # Without the window it does.
    assert (
        np.abs(run(full, inputs)[:, 4] - run(full, changed)[:, 4]).max() > 1e-4
    )
    # The window size is ignored unless the window is switched on.
    switched_off = QwenBackbone(**config, sliding_window_size=2)
    switched_off.set_weights(full.get_weights())
    np.testing.assert_allclose(
        run(switched_off, changed), run(full, changed), atol=1e-6
    )


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="num_query_heads=5"):
        QwenBackbone(**dict(TINY, num_query_heads=5))
    with pytest.raises(ValueError, match="num_key_value_heads=4"):
        QwenBackbone(**dict(TINY, num_key_value_heads=4))
    with pytest.raises(ValueError, match="sliding_window_size=0"):
        QwenBackbone(
            **TINY, use_sliding_window_attention=True, sliding_window_size=0
        )
    with pytest.raises(ValueError, match="Unknown preset 'qwen2.5_1b'"):
        QwenBackbone.plan_layout({"batch": 1, "model": 1}, preset="qwen2.5_1b")
