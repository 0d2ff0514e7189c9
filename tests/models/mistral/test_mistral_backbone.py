"""MistralBackbone: paths, shapes, presets, config round trip, errors."""

import re
import textwrap

import keras
import numpy as np
import pytest

from keras_nlp.models.mistral.mistral_backbone import MistralBackbone

TINY = dict(
    vocabulary_size=64,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=48,
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1, 3], [0, 0, 3, 4, 8, 6]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]], "int32"),
}


def expected_paths(num_layers, V=64, H=32, Nq=4, Nkv=2, Dh=8, F=48):
    paths = {
        "token_embedding/embeddings": (V, H),
        "token_embedding/reverse_embeddings": (H, V),
    }
    for i in range(num_layers):
        block = f"transformer_layer_{i}/"
        attention = block + "self_attention/"
        paths.update(
            {
                attention + "query/kernel": (H, Nq, Dh),
                attention + "key/kernel": (H, Nkv, Dh),
                attention + "value/kernel": (H, Nkv, Dh),
                attention + "attention_output/kernel": (Nq, Dh, H),
                block + "self_attention_layernorm/scale": (H,),
                block + "feedforward_intermediate_dense/kernel": (H, F),
                block + "feedforward_gate_dense/kernel": (H, F),
                block + "feedforward_output_dense/kernel": (F, H),
                block + "feedforward_layernorm/scale": (H,),
            }
        )
    paths["sequence_output_layernorm/scale"] = (H,)
    return paths


def full_params(V, L, H, Nq, Nkv, Dh, F):
    attention = H * Nq * Dh * 2 + H * Nkv * Dh * 2
    block = attention + 3 * H * F + 2 * H
    return 2 * V * H + L * block + H


def test_variable_paths_shapes_and_output():
    model = MistralBackbone(**TINY)
    assert {v.path: tuple(v.shape) for v in model.weights} == expected_paths(2)
    assert len(model.weights) == len(expected_paths(2))
    assert model(INPUTS).shape == (2, 6, 32)
    assert set(model.input) == {"token_ids", "padding_mask"}


def test_explicit_head_dim():
    model = MistralBackbone(**dict(TINY, head_dim=16, num_layers=1))
    assert {v.path: tuple(v.shape) for v in model.weights} == expected_paths(
        1, Dh=16
    )
    assert model(INPUTS).shape == (2, 6, 32)


@pytest.mark.parametrize(
    "preset, expected",
    [
        # The reference's full-model counts (they match the preset metadata).
        ("mistral_7b_en", 7_241_732_096),
        ("mistral_0.3_7b_en", 7_248_023_552),
    ],
)
def test_preset_parameter_counts(preset, expected):
    plan = MistralBackbone.plan_layout({"batch": 1, "model": 1}, preset=preset)
    assert plan.total_params == expected
    config = MistralBackbone.presets[preset]
    assert expected == full_params(
        config["vocabulary_size"], 32, 4096, 32, 8, 128, 14336
    )
    shapes = {w.path: w.shape for w in plan.weights}
    layer_31 = {
        re.sub("transformer_layer_31/", "transformer_layer_0/", p): s
        for p, s in shapes.items()
        if p.startswith("transformer_layer_31/")
    }
    reference = expected_paths(
        1, V=config["vocabulary_size"], H=4096, Nq=32, Nkv=8, Dh=128, F=14336
    )
    assert layer_31 == {
        p: s for p, s in reference.items() if p.startswith("transformer_")
    }


def test_preset_configs():
    presets = MistralBackbone.presets
    assert set(presets) == {"mistral_7b_en", "mistral_0.3_7b_en"}
    # v0.1 attends within a 4096-token window; v0.3 attends to everything.
    assert presets["mistral_7b_en"]["sliding_window"] == 4096
    assert presets["mistral_0.3_7b_en"]["sliding_window"] is None
    assert presets["mistral_0.3_7b_en"]["rope_max_wavelength"] == 1_000_000
    model = MistralBackbone.from_preset(
        "mistral_7b_en",
        load_weights=False,
        num_layers=1,
        vocabulary_size=64,
        hidden_dim=64,
        intermediate_dim=32,
        num_query_heads=4,
        num_key_value_heads=1,
    )
    assert model.sliding_window == 4096
    attention = model.transformer_layers[0].attention
    assert attention.sliding_window_size == 4096


def test_sliding_window_limits_what_a_token_sees():
    model = MistralBackbone(**dict(TINY, sliding_window=2))
    changed = {k: v.copy() for k, v in INPUTS.items()}
    # Token 0 is outside the window of token 2 onwards in layer 0, but its
    # influence travels one window per layer: with 2 layers, positions
    # 0 + 2 * (2 - 1) = 2 and earlier can see it, later ones cannot.
    changed["token_ids"][0, 0] = 33
    before = keras.ops.convert_to_numpy(model(INPUTS))
    after = keras.ops.convert_to_numpy(model(changed))
    assert not np.allclose(before[0, 2], after[0, 2])
    np.testing.assert_array_equal(before[0, 3:], after[0, 3:])
    np.testing.assert_array_equal(before[1], after[1])


def test_dropout_only_in_training():
    model = MistralBackbone(**TINY, dropout=0.3)
    train = keras.ops.convert_to_numpy(model(INPUTS, training=True))
    infer = keras.ops.convert_to_numpy(model(INPUTS, training=False))
    assert not np.allclose(train, infer)
    np.testing.assert_array_equal(
        infer, keras.ops.convert_to_numpy(model(INPUTS))
    )


@pytest.mark.parametrize(
    "override, words",
    [
        ({"num_query_heads": 5}, ["hidden_dim=32", "num_query_heads=5"]),
        (
            {"num_key_value_heads": 3},
            ["num_key_value_heads=3", "must divide `num_query_heads`"],
        ),
        ({"sliding_window": 0}, ["sliding_window=0", "positive integer"]),
        ({"sliding_window": 2.5}, ["sliding_window=2.5", "or None"]),
        ({"head_dim": -8}, ["head_dim=-8", "positive integer or None"]),
        ({"num_layers": 0}, ["num_layers=0", "positive integer"]),
        ({"vocabulary_size": 12.5}, ["vocabulary_size=12.5", "positive"]),
    ],
)
def test_invalid_arguments_are_named(override, words):
    with pytest.raises(ValueError) as error:
        MistralBackbone(**{**TINY, **override})
    for word in words:
        assert word in str(error.value)


def test_head_dim_lifts_the_divisibility_requirement():
    model = MistralBackbone(
        **dict(TINY, num_query_heads=5, num_key_value_heads=1, head_dim=8)
    )
    assert model(INPUTS).shape == (2, 6, 32)


def test_docstring_example_runs():
    """The class docstring's Example block runs as written."""
    (block,) = re.findall(
        r"```python\n(.*?)```", MistralBackbone.__doc__, re.DOTALL
    )
    namespace = {}
    exec(textwrap.dedent(block), namespace)
    assert tuple(namespace["hidden_states"].shape) == (2, 4, 32)
