import re

import numpy as np
import pytest
from keras import ops

from keras_nlp.models.bloom.bloom_backbone import BloomBackbone

TINY = dict(
    vocabulary_size=64,
    num_layers=2,
    num_heads=4,
    hidden_dim=32,
    intermediate_dim=48,
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1], [0, 0, 3, 4, 8]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], "int32"),
}


def expected_paths(num_layers, V=64, H=32, N=4, F=48):
    """Variable path -> shape, as in keras-hub's BLOOM checkpoints."""
    paths = {
        "token_embedding/embeddings": (V, H),
        "embedding_layernorm/gamma": (H,),
        "embedding_layernorm/beta": (H,),
    }
    for i in range(num_layers):
        block = f"transformer_layer_{i}"
        attention = f"{block}/self_attention"
        for norm in ("pre_attention_layernorm", "post_attention_layernorm"):
            paths[f"{block}/{norm}/gamma"] = (H,)
            paths[f"{block}/{norm}/beta"] = (H,)
        for kind in ("query", "key", "value"):
            paths[f"{attention}/{kind}_dense/kernel"] = (H, N, H // N)
            paths[f"{attention}/{kind}_dense/bias"] = (N, H // N)
        paths[f"{attention}/output_dense/kernel"] = (H, H)
        paths[f"{attention}/output_dense/bias"] = (H,)
        paths[f"{block}/mlp_intermediate_dense/kernel"] = (H, F)
        paths[f"{block}/mlp_intermediate_dense/bias"] = (F,)
        paths[f"{block}/mlp_output_dense/kernel"] = (F, H)
        paths[f"{block}/mlp_output_dense/bias"] = (H,)
    paths["final_layernorm/gamma"] = (H,)
    paths["final_layernorm/beta"] = (H,)
    return paths


def full_params(V, L, H, F):
    """Embedding, its norm, L blocks, final norm; tied, no positions."""
    attention = 4 * (H * H + H)  # q, k, v, output kernels and biases
    mlp = H * F + F + F * H + H
    norms = 2 * 2 * H
    return V * H + 2 * H + L * (attention + mlp + norms) + 2 * H


def test_variable_paths_and_shapes():
    model = BloomBackbone(**TINY)
    actual = {v.path: tuple(v.shape) for v in model.weights}
    assert actual == expected_paths(2)
    assert len(model.weights) == len(actual)  # no duplicate paths
    assert model.count_params() == full_params(64, 2, 32, 48)


def test_bloom_560m_paths_without_allocating():
    plan = BloomBackbone.plan_layout(
        {"batch": 1, "model": 1}, preset="bloom_560m_multi"
    )
    actual = {w.path: w.shape for w in plan.weights}
    assert actual == expected_paths(24, V=250880, H=1024, N=16, F=4096)


@pytest.mark.parametrize(
    "preset, expected",
    [
        # The reference's full-model counts.
        ("bloom_560m_multi", 559_214_592),
        ("bloom_3b_multi", 3_002_557_440),
    ],
)
def test_preset_parameter_counts(preset, expected):
    plan = BloomBackbone.plan_layout({"batch": 1, "model": 1}, preset=preset)
    assert plan.total_params == expected
    config = BloomBackbone.presets[preset]
    assert expected == full_params(
        config["vocabulary_size"],
        config["num_layers"],
        config["hidden_dim"],
        config["intermediate_dim"],
    )


def test_preset_configs():
    presets = BloomBackbone.presets
    assert set(presets) == {"bloom_560m_multi", "bloom_3b_multi"}
    for config in presets.values():
        assert config["vocabulary_size"] == 250880
        assert config["intermediate_dim"] == 4 * config["hidden_dim"]
    # bloom_3b_multi has 80-wide heads.
    config = presets["bloom_3b_multi"]
    assert config["hidden_dim"] // config["num_heads"] == 80
    model = BloomBackbone.from_preset(
        "bloom_3b_multi",
        load_weights=False,
        num_layers=1,
        vocabulary_size=128,
        hidden_dim=64,
        intermediate_dim=32,
    )
    assert model.num_heads == 32


@pytest.mark.parametrize(
    "override, words",
    [
        ({"num_heads": 5}, ["hidden_dim=32", "num_heads=5", "divisible"]),
        ({"num_heads": 0}, ["num_heads=0", "positive integer"]),
        ({"num_layers": 0}, ["num_layers=0", "positive integer"]),
        ({"vocabulary_size": 12.5}, ["vocabulary_size=12.5", "positive"]),
        ({"intermediate_dim": -4}, ["intermediate_dim=-4", "positive"]),
    ],
)
def test_invalid_arguments(override, words):
    with pytest.raises(ValueError) as error:
        BloomBackbone(**{**TINY, **override})
    for word in words:
        assert word in str(error.value)


def test_training_with_dropout():
    model = BloomBackbone(**TINY, dropout=0.3)
    train = ops.convert_to_numpy(model(INPUTS, training=True))
    infer = ops.convert_to_numpy(model(INPUTS, training=False))
    assert train.shape == infer.shape == (2, 5, 32)
    assert np.all(np.isfinite(train))
    assert not np.allclose(train, infer)  # dropout is active in training
    np.testing.assert_array_equal(
        infer, ops.convert_to_numpy(model(INPUTS, training=False))
    )


def test_docstring_example_runs():
    code = re.findall(r"```python\n(.*?)```", BloomBackbone.__doc__, re.DOTALL)
    lines = code[-1].splitlines()
    indent = min(len(line) - len(line.lstrip()) for line in lines if line)
    namespace = {}
    exec("\n".join(line[indent:] for line in lines), namespace)
    assert tuple(namespace["hidden_states"].shape) == (2, 4, 32)
