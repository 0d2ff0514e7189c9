"""Numerical parity of keras_nlp's GPT-NeoX with keras-hub's (the oracle).

keras-hub's GPT-NeoX attention has two paths: `ops.dot_product_attention`
where Keras offers flash attention (JAX, torch) and dropout is 0, an
explicit masked softmax otherwise (TensorFlow, or dropout > 0). They differ
only on left-padded query rows, which may attend to nothing: the fused path
averages the values there (as ours does, on every backend), the explicit
one gives zeros. Those rows feed no real token, and `assert_matches_oracle`
compares real tokens only. Every case runs on the backend's own path; a few
are also pinned to the other path, and one compares every position with the
fused path.
"""

import keras
import keras_hub
import keras_hub.src.models.gpt_neo_x.gpt_neo_x_attention as hub_attention
import numpy as np
import pytest

from keras_nlp.models.gpt_neo_x.gpt_neo_x_backbone import GPTNeoXBackbone
from tests.models.backbone_checks import assert_matches_oracle
from tests.models.backbone_checks import copy_weights_by_path
from tests.models.backbone_checks import random_inputs

VOCAB = 97
BASE = dict(
    vocabulary_size=VOCAB,
    num_layers=2,
    hidden_dim=64,
    intermediate_dim=96,
    max_sequence_length=32,
)
# name -> (num_heads, rotary_percentage, other options). head_dim is 64 /
# num_heads; every config rotates an even number of features.
CASES = {
    "heads1_rot1.0": (1, 1.0, {}),
    "heads1_rot0.25": (1, 0.25, {}),
    "heads2_rot0.25": (2, 0.25, {}),
    "heads4_rot0.25": (4, 0.25, {}),
    "heads4_rot1.0": (4, 1.0, {}),
    "heads8_rot0.25": (8, 0.25, {}),
    "heads8_rot1.0": (8, 1.0, {}),
    "heads4_rot0.5": (4, 0.5, {}),
    "heads4_options": (
        4,
        0.25,
        dict(rotary_max_wavelength=100, layer_norm_epsilon=1e-3),
    ),
}


@pytest.fixture
def oracle_path(monkeypatch):
    """Pins keras-hub's GPT-NeoX attention to its fused or explicit path."""

    def pin(fused):
        monkeypatch.setattr(
            hub_attention, "fused_attention_op_available", lambda: fused
        )

    return pin


def make_config(name):
    num_heads, rotary_percentage, options = CASES[name]
    return dict(
        BASE,
        num_heads=num_heads,
        rotary_percentage=rotary_percentage,
        **options,
    )


def sharpen(model, seed=0):
    """Gives every kernel unit-scale outputs so attention is far from flat.

    With the default 0.02 initializer the attention logits are tiny and
    rotary or query/key mistakes change outputs by less than the tolerance.
    """
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if variable.path.endswith(("/kernel", "/embeddings")):
            fan_in = variable.shape[0]
            scale = 1.0 if variable.path.endswith("embeddings") else fan_in
            value = rng.normal(0.0, scale**-0.5, variable.shape)
            variable.assign(value.astype("float32"))


def make_pair(config, seed=0):
    keras.utils.set_random_seed(seed)
    oracle = keras_hub.models.GPTNeoXBackbone(**config)
    sharpen(oracle, seed)
    ours = GPTNeoXBackbone(**config)
    return oracle, ours


@pytest.mark.parametrize("name", list(CASES))
def test_matches_keras_hub(name):
    config = make_config(name)
    oracle, ours = make_pair(config)
    max_diff = assert_matches_oracle(ours, oracle, random_inputs(VOCAB))
    print(f"{name}: max |ours - keras_hub| = {max_diff:.3e}")


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "explicit"])
@pytest.mark.parametrize(
    "name, options",
    [
        ("heads4_rot0.25", {}),
        ("heads8_rot1.0", {}),
        # keras-hub always takes the explicit path with dropout > 0; at
        # inference dropout is off and outputs agree.
        ("heads2_rot0.25", dict(dropout=0.1)),
    ],
)
def test_matches_either_keras_hub_attention_path(
    name, options, fused, oracle_path
):
    oracle_path(fused=fused)
    config = {**make_config(name), **options}
    oracle, ours = make_pair(config)
    assert_matches_oracle(ours, oracle, random_inputs(VOCAB))


def test_padded_rows_average_the_values_like_the_fused_path(oracle_path):
    oracle_path(fused=True)
    oracle, ours = make_pair(make_config("heads4_rot0.25"))
    inputs = random_inputs(VOCAB)
    copy_weights_by_path(oracle, ours)
    expected = keras.ops.convert_to_numpy(oracle(inputs))
    actual = keras.ops.convert_to_numpy(ours(inputs))
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "ours_override, oracle_override",
    [
        ({"rotary_percentage": 0.25}, {"rotary_percentage": 1.0}),
        ({"rotary_percentage": 0.25}, {"rotary_percentage": 0.5}),
        ({"rotary_max_wavelength": 10000}, {"rotary_max_wavelength": 100}),
    ],
)
def test_the_comparison_detects_rotary_mistakes(
    ours_override, oracle_override, oracle_path
):
    """The oracle check above is sharp enough to see a wrong rotary width."""
    oracle_path(fused=True)
    config = make_config("heads4_rot0.25")
    keras.utils.set_random_seed(0)
    oracle = keras_hub.models.GPTNeoXBackbone(**{**config, **oracle_override})
    sharpen(oracle)
    ours = GPTNeoXBackbone(**{**config, **ours_override})
    with pytest.raises(AssertionError):
        assert_matches_oracle(ours, oracle, random_inputs(VOCAB))


def test_fused_split_order_is_query_key_value(oracle_path):
    """Swapping the fused kernel's key and value slices breaks parity."""
    oracle_path(fused=True)
    config = make_config("heads4_rot1.0")
    oracle, ours = make_pair(config)
    inputs = random_inputs(VOCAB)
    assert_matches_oracle(ours, oracle, inputs)
    head_dim = config["hidden_dim"] // config["num_heads"]
    for variable in ours.weights:
        if "query_key_value" in variable.path:
            value = keras.ops.convert_to_numpy(variable)
            query, key, value_ = np.split(value, 3, axis=-1)
            assert query.shape[-1] == head_dim
            variable.assign(np.concatenate([query, value_, key], axis=-1))
    expected = keras.ops.convert_to_numpy(oracle(inputs))
    actual = keras.ops.convert_to_numpy(ours(inputs))
    assert np.max(np.abs(actual - expected)) > 1e-3
