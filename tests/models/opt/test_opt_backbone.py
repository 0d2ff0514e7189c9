import keras
import numpy as np
import pytest
from keras import ops

from keras_nlp.models.opt.opt_backbone import OPTBackbone

TINY = dict(
    vocabulary_size=97,
    num_layers=2,
    num_heads=4,
    hidden_dim=32,
    intermediate_dim=48,
    dropout=0.0,
    max_sequence_length=16,
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1], [0, 0, 3, 4, 8]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], "int32"),
}


def expected_paths(num_layers, V=97, P=16, H=32, N=4, F=48):
    paths = {
        "embeddings/token_embedding/embeddings": (V, H),
        "embeddings/position_embedding/embeddings": (P, H),
    }
    for i in range(num_layers):
        block = f"transformer_layer_{i}"
        attention = f"{block}/self_attention"
        for kind in ("query", "key", "value"):
            paths[f"{attention}/{kind}/kernel"] = (H, N, H // N)
            paths[f"{attention}/{kind}/bias"] = (N, H // N)
        paths[f"{attention}/attention_output/kernel"] = (N, H // N, H)
        paths[f"{attention}/attention_output/bias"] = (H,)
        for norm in ("self_attention_layer_norm", "feedforward_layer_norm"):
            paths[f"{block}/{norm}/gamma"] = (H,)
            paths[f"{block}/{norm}/beta"] = (H,)
        paths[f"{block}/feedforward_intermediate_dense/kernel"] = (H, F)
        paths[f"{block}/feedforward_intermediate_dense/bias"] = (F,)
        paths[f"{block}/feedforward_output_dense/kernel"] = (F, H)
        paths[f"{block}/feedforward_output_dense/bias"] = (H,)
    paths["layer_norm/gamma"] = (H,)
    paths["layer_norm/beta"] = (H,)
    return paths


def block_params(H, F):
    attention = 4 * (H * H + H)  # q, k, v, output kernels and biases
    layer_norms = 2 * 2 * H
    mlp = H * F + F + F * H + H
    return attention + layer_norms + mlp


def full_params(V, P, L, H, F):
    # Tied token table, position table, blocks, final layer norm.
    return V * H + P * H + L * block_params(H, F) + 2 * H


def test_variable_paths_and_shapes():
    model = OPTBackbone(**TINY)
    actual = {v.path: tuple(v.shape) for v in model.weights}
    assert actual == expected_paths(2)
    assert len(model.weights) == len(actual)  # no duplicate paths
    assert model.count_params() == full_params(97, 16, 2, 32, 48)


def test_opt_125m_paths_without_allocating():
    plan = OPTBackbone.plan_layout(
        {"batch": 1, "model": 1}, preset="opt_125m_en"
    )
    actual = {w.path: w.shape for w in plan.weights}
    assert actual == expected_paths(12, V=50272, P=2048, H=768, N=12, F=3072)


@pytest.mark.parametrize(
    "preset, expected",
    [
        # The reference's full-model counts (they match keras-hub's
        # metadata).
        ("opt_125m_en", 125_237_760),
        ("opt_1.3b_en", 1_315_753_984),
        # Not in the reference: V=50272, P=2048, L=32, H=2560, F=10240:
        # 50272*2560 + 2048*2560 + 32*(4*(2560*2560 + 2560) + 4*2560
        # + 2*2560*10240 + 10240 + 2560) + 2*2560.
        ("opt_2.7b_en", full_params(50272, 2048, 32, 2560, 10240)),
        # H=4096, F=16384, otherwise as above.
        ("opt_6.7b_en", full_params(50272, 2048, 32, 4096, 16384)),
    ],
)
def test_preset_parameter_counts(preset, expected):
    plan = OPTBackbone.plan_layout({"batch": 1, "model": 1}, preset=preset)
    assert plan.total_params == expected


def test_parameter_count_formula():
    # Per-block counts of the reference for opt_125m_en and opt_1.3b_en.
    assert block_params(768, 3072) == 7_087_872
    assert block_params(2048, 8192) == 50_358_272
    assert full_params(50272, 2048, 12, 768, 3072) == 125_237_760
    assert full_params(50272, 2048, 32, 2560, 10240) == 2_651_591_680
    assert full_params(50272, 2048, 32, 4096, 16384) == 6_658_465_792


def test_preset_configs():
    presets = OPTBackbone.presets
    assert list(presets) == [
        "opt_125m_en",
        "opt_1.3b_en",
        "opt_2.7b_en",
        "opt_6.7b_en",
    ]
    sizes = [
        (c["num_layers"], c["num_heads"], c["hidden_dim"])
        for c in presets.values()
    ]
    assert sizes == [(12, 12, 768), (24, 32, 2048), (32, 32, 2560)] + [
        (32, 32, 4096)
    ]
    head_dims = [c["hidden_dim"] // c["num_heads"] for c in presets.values()]
    assert head_dims == [64, 64, 80, 128]
    for config in presets.values():
        assert config["vocabulary_size"] == 50272
        assert config["max_sequence_length"] == 2048
        assert config["intermediate_dim"] == 4 * config["hidden_dim"]
    model = OPTBackbone.from_preset(
        "opt_2.7b_en",
        load_weights=False,
        num_layers=1,
        vocabulary_size=64,
        hidden_dim=64,
        intermediate_dim=16,
    )
    assert model.num_heads == 32
    assert model.max_sequence_length == 2048


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_config_round_trip(dropout):
    options = dict(TINY, dropout=dropout, max_sequence_length=24)
    model = OPTBackbone(**options, name="my_opt")
    config = model.get_config()
    for key, value in options.items():
        assert config[key] == value
    assert config["name"] == "my_opt"
    assert "dtype" in config and "trainable" in config

    clone = OPTBackbone.from_config(config)
    assert clone.get_config() == config
    clone.set_weights(model.get_weights())
    np.testing.assert_array_equal(
        ops.convert_to_numpy(clone(INPUTS)), ops.convert_to_numpy(model(INPUTS))
    )


def test_defaults_are_keras_hubs():
    model = OPTBackbone(
        vocabulary_size=10,
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
    )
    assert model.dropout == 0.1
    assert model.max_sequence_length == 2048


def test_output_shape_and_dtype_policy():
    model = OPTBackbone(**TINY)
    out = model(INPUTS)
    assert tuple(out.shape) == (2, 5, 32)
    assert set(model.input) == {"token_ids", "padding_mask"}

    model = OPTBackbone(**TINY, dtype="bfloat16")
    out = model(INPUTS)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    assert all(
        keras.backend.standardize_dtype(v.dtype) == "bfloat16"
        for v in model.weights
    )
    assert np.all(np.isfinite(ops.convert_to_numpy(ops.cast(out, "float32"))))


def test_tied_logits():
    model = OPTBackbone(**TINY)
    assert model.token_embedding is model.embeddings.token_embedding
    hidden = model(INPUTS)
    logits = ops.convert_to_numpy(model.token_embedding(hidden, reverse=True))
    table = ops.convert_to_numpy(model.token_embedding.embeddings)
    assert logits.shape == (2, 5, 97)
    np.testing.assert_allclose(
        logits, ops.convert_to_numpy(hidden) @ table.T, atol=1e-5
    )


def test_initial_weights_differ_between_kernels():
    model = OPTBackbone(**TINY)
    kernels = [
        ops.convert_to_numpy(v)
        for v in model.weights
        if v.path.endswith("/kernel") and "self_attention/" in v.path
    ]
    assert len(kernels) == 8
    for i, first in enumerate(kernels):
        for second in kernels[i + 1 :]:
            assert first.shape != second.shape or not np.allclose(first, second)
    for kernel in kernels:
        # TruncatedNormal(stddev=0.02) cuts at two deviations.
        assert 0.01 < kernel.std() < 0.02
        assert np.abs(kernel).max() <= 0.04 + 1e-6


# A left-padded query attends to no key: its output is undefined (here an
# average of all values), so only real tokens are compared.
REAL = INPUTS["padding_mask"].astype(bool)


def test_causal_and_right_padding():
    model = OPTBackbone(**TINY)
    before = ops.convert_to_numpy(model(INPUTS))
    changed = {k: v.copy() for k, v in INPUTS.items()}
    changed["token_ids"][:, -1] = 11
    after = ops.convert_to_numpy(model(changed))
    earlier = REAL.copy()
    earlier[:, -1] = False
    np.testing.assert_array_equal(before[earlier], after[earlier])
    assert not np.allclose(before[:, -1], after[:, -1])

    # Right padding is invisible to the real tokens before it: positions
    # count from the first token, and padded keys are masked.
    padded = {
        "token_ids": np.array([[5, 9, 2, 0, 0]], "int32"),
        "padding_mask": np.array([[1, 1, 1, 0, 0]], "int32"),
    }
    short = {k: v[:, :3] for k, v in padded.items()}
    np.testing.assert_allclose(
        ops.convert_to_numpy(model(padded))[:, :3],
        ops.convert_to_numpy(model(short)),
        atol=1e-6,
    )


def test_positions_count_from_the_first_token():
    model = OPTBackbone(**TINY)
    # Swapping two position rows changes exactly the outputs from the
    # earlier of the two positions onward.
    table = model.embeddings.position_embedding.embeddings
    values = ops.convert_to_numpy(table).copy()
    before = ops.convert_to_numpy(model(INPUTS))
    values[[3, 4]] = values[[4, 3]]
    table.assign(values)
    after = ops.convert_to_numpy(model(INPUTS))
    earlier = REAL.copy()
    earlier[:, 3:] = False
    np.testing.assert_array_equal(before[earlier], after[earlier])
    for row in range(2):
        assert not np.allclose(before[row, 3:], after[row, 3:])


@pytest.mark.parametrize(
    "override, words",
    [
        ({"num_heads": 5}, ["hidden_dim=32", "num_heads=5", "divisible"]),
        ({"num_layers": 0}, ["num_layers=0", "positive integer"]),
        ({"vocabulary_size": 12.5}, ["vocabulary_size=12.5", "positive"]),
        ({"num_heads": True}, ["num_heads=True", "positive integer"]),
        (
            {"max_sequence_length": None},
            ["max_sequence_length=None", "positive integer"],
        ),
        ({"dropout": 1.0}, ["dropout=1.0", "[0, 1)"]),
    ],
)
def test_invalid_arguments(override, words):
    with pytest.raises(ValueError) as error:
        OPTBackbone(**{**TINY, **override})
    for word in words:
        assert word in str(error.value)


def test_training_with_dropout():
    model = OPTBackbone(**{**TINY, "dropout": 0.3})
    train = ops.convert_to_numpy(model(INPUTS, training=True))
    infer = ops.convert_to_numpy(model(INPUTS, training=False))
    assert train.shape == infer.shape == (2, 5, 32)
    assert np.all(np.isfinite(train))
    assert not np.allclose(train, infer)  # dropout is active in training
    np.testing.assert_array_equal(
        infer, ops.convert_to_numpy(model(INPUTS, training=False))
    )
