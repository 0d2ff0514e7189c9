import re

import numpy as np
import pytest
from keras import ops

from keras_nlp.models.falcon.falcon_backbone import FalconBackbone

TINY = dict(
    vocabulary_size=64,
    num_layers=2,
    num_attention_heads=4,
    hidden_dim=32,
    intermediate_dim=48,
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1], [0, 0, 3, 4, 8]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], "int32"),
}


def expected_paths(num_layers, V=64, H=32, N=4, F=48):
    """Variable path -> shape, as in keras-hub's Falcon checkpoints."""
    paths = {"token_embedding/embeddings": (V, H)}
    for i in range(num_layers):
        block = f"transformer_layer_{i}"
        attention = f"{block}/attention"
        for norm in ("input_layernorm", "post_attention_layernorm"):
            paths[f"{block}/{norm}/gamma"] = (H,)
            paths[f"{block}/{norm}/beta"] = (H,)
        for kind in ("query", "key", "value"):
            paths[f"{attention}/{kind}_dense/kernel"] = (H, N, H // N)
            paths[f"{attention}/{kind}_dense/bias"] = (N, H // N)
        paths[f"{attention}/output_dense/kernel"] = (H, H)
        paths[f"{attention}/output_dense/bias"] = (H,)
        paths[f"{block}/dense_h_to_4h/kernel"] = (H, F)
        paths[f"{block}/dense_h_to_4h/bias"] = (F,)
        paths[f"{block}/dense_4h_to_h/kernel"] = (F, H)
        paths[f"{block}/dense_4h_to_h/bias"] = (H,)
    paths["final_layernorm/gamma"] = (H,)
    paths["final_layernorm/beta"] = (H,)
    return paths


def full_params(V, L, H, F):
    """Tied embedding, L blocks, final norm; no position embedding."""
    attention = 4 * (H * H + H)  # q, k, v, output kernels and biases
    mlp = H * F + F + F * H + H
    norms = 2 * 2 * H
    return V * H + L * (attention + mlp + norms) + 2 * H


def test_variable_paths_and_shapes():
    model = FalconBackbone(**TINY)
    actual = {v.path: tuple(v.shape) for v in model.weights}
    assert actual == expected_paths(2)
    assert len(model.weights) == len(actual)  # no duplicate paths
    assert model.count_params() == full_params(64, 2, 32, 48)


def test_falcon_1b_paths_and_parameter_count_without_allocating():
    plan = FalconBackbone.plan_layout(
        {"batch": 1, "model": 1}, preset="falcon_refinedweb_1b_en"
    )
    actual = {w.path: w.shape for w in plan.weights}
    assert actual == expected_paths(24, V=50304, H=2048, N=32, F=8192)
    # The reference's full-model count.
    assert plan.total_params == 1_311_625_216
    assert full_params(50304, 24, 2048, 8192) == 1_311_625_216


def test_preset_configs():
    presets = FalconBackbone.presets
    assert set(presets) == {"falcon_refinedweb_1b_en"}
    model = FalconBackbone.from_preset(
        "falcon_refinedweb_1b_en",
        load_weights=False,
        num_layers=1,
        vocabulary_size=128,
        hidden_dim=64,
        intermediate_dim=32,
    )
    assert model.num_attention_heads == 32
    assert model.layer_norm_epsilon == 1e-5


@pytest.mark.parametrize(
    "override, words",
    [
        (
            {"num_attention_heads": 5},
            ["hidden_dim=32", "num_attention_heads=5", "divisible"],
        ),
        (
            {"num_attention_heads": 0},
            ["num_attention_heads=0", "positive integer"],
        ),
        ({"num_layers": 0}, ["num_layers=0", "positive integer"]),
        ({"vocabulary_size": 12.5}, ["vocabulary_size=12.5", "positive"]),
        ({"intermediate_dim": -4}, ["intermediate_dim=-4", "positive"]),
    ],
)
def test_invalid_arguments(override, words):
    with pytest.raises(ValueError) as error:
        FalconBackbone(**{**TINY, **override})
    for word in words:
        assert word in str(error.value)


@pytest.mark.parametrize(
    "rates",
    [
        dict(attention_dropout_rate=0.3),
        dict(feedforward_dropout_rate=0.3),
    ],
)
def test_training_with_dropout(rates):
    model = FalconBackbone(**TINY, **rates)
    block = model.transformer_layers[0]
    assert block.attention.dropout == rates.get("attention_dropout_rate", 0)
    assert block.attention_dropout.rate == rates.get(
        "attention_dropout_rate", 0
    )
    assert block.feedforward_dropout.rate == rates.get(
        "feedforward_dropout_rate", 0
    )
    train = ops.convert_to_numpy(model(INPUTS, training=True))
    infer = ops.convert_to_numpy(model(INPUTS, training=False))
    assert train.shape == infer.shape == (2, 5, 32)
    assert np.all(np.isfinite(train))
    assert not np.allclose(train, infer)  # dropout is active in training
    np.testing.assert_array_equal(
        infer, ops.convert_to_numpy(model(INPUTS, training=False))
    )


def test_docstring_example_runs():
    code = re.findall(r"```python\n(.*?)```", FalconBackbone.__doc__, re.DOTALL)
    lines = code[-1].splitlines()
    indent = min(len(line) - len(line.lstrip()) for line in lines if line)
    namespace = {}
    exec("\n".join(line[indent:] for line in lines), namespace)
    assert tuple(namespace["hidden_states"].shape) == (2, 4, 32)


# Falcon-7B: one key/value head, rotary, one norm, no biases; Falcon-40B:
# grouped key/value heads and two norms (`ln_attn`, `ln_mlp`).
FALCON_7B = dict(
    num_key_value_heads=1,
    rotary_max_wavelength=10000,
    parallel_residual=True,
    shared_layer_norm=True,
    use_bias=False,
)
FALCON_40B = dict(
    num_key_value_heads=2,
    rotary_max_wavelength=10000,
    parallel_residual=True,
    use_bias=False,
)


@pytest.mark.parametrize(
    "options, norms, kv_heads",
    [
        (FALCON_7B, ("input_layernorm",), 1),
        (FALCON_40B, ("ln_attn", "ln_mlp"), 2),
    ],
    ids=["falcon_7b", "falcon_40b"],
)
def test_variant_paths_and_shapes(options, norms, kv_heads):
    model = FalconBackbone(**TINY, **options)
    block = "transformer_layer_1/"
    attention = block + "attention/"
    expected = {
        attention + "query_dense/kernel": (32, 4, 8),
        attention + "key_dense/kernel": (32, kv_heads, 8),
        attention + "value_dense/kernel": (32, kv_heads, 8),
        attention + "output_dense/kernel": (32, 32),
        block + "dense_h_to_4h/kernel": (32, 48),
        block + "dense_4h_to_h/kernel": (48, 32),
        **{
            block + f"{norm}/{w}": (32,)
            for norm in norms
            for w in "gamma beta".split()
        },
    }
    actual = {
        v.path: tuple(v.shape)
        for v in model.weights
        if v.path.startswith(block)
    }
    assert actual == expected
    hidden = ops.convert_to_numpy(model(INPUTS))
    assert hidden.shape == (2, 5, 32) and np.all(np.isfinite(hidden))
    assert model.get_config()["num_key_value_heads"] == kv_heads


@pytest.mark.parametrize(
    "override, words",
    [
        (
            {"shared_layer_norm": True},
            ["shared_layer_norm=True", "parallel_residual=False"],
        ),
        (
            {"num_key_value_heads": 3},
            ["num_key_value_heads=3", "num_attention_heads=4", "divide"],
        ),
    ],
)
def test_invalid_variant_options(override, words):
    with pytest.raises(ValueError) as error:
        FalconBackbone(**TINY, **override)
    for word in words:
        assert word in str(error.value)
