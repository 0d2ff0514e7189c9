"""GatedFeedForward: paths, keras-hub's dense Qwen MoE feed-forward, config.

keras-hub's `QwenMoeMLP` (its inputs, weights and outputs) is stored by
`python -m tests.oracles gated_feedforward`; no test here builds it live:
the live `dense_block` row of the Qwen MoE backbone in
tests/models/oracle_cases.py runs keras-hub's block against its stored
outputs (tests/models/test_backbone_oracles.py).
"""

import keras
import numpy as np
import pytest

from keras_nlp.layers.gated_feedforward import GatedFeedForward
from tests import oracles

HIDDEN, WIDTH = 8, 12
DATA = "gated_feedforward-qwen_moe_mlp"


def generate_oracle_data():
    from keras_hub.src.models.qwen_moe.qwen_moe_decoder import QwenMoeMLP

    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, HIDDEN)).astype("float32")
    oracle = QwenMoeMLP(WIDTH, HIDDEN, name="qwen_moe_mlp")
    oracle.build(x.shape)
    arrays = {"inputs": x}
    for variable in oracle.weights:
        value = rng.normal(0, variable.shape[0] ** -0.5, variable.shape)
        variable.assign(value.astype("float32"))
        arrays[f"weights/{variable.path}"] = value.astype("float32")
    arrays["outputs"] = keras.ops.convert_to_numpy(oracle(x))
    return {DATA: arrays}


def test_paths_and_output_equal_keras_hubs_dense_block():
    stored = oracles.load(DATA)
    sources = {k.split("/", 1)[1]: v for k, v in stored.items() if "/" in k}
    x = stored["inputs"]
    ours = GatedFeedForward(WIDTH, name="qwen_moe_mlp")
    ours.build(x.shape)
    targets = {v.path: v for v in ours.weights}
    assert (
        sorted(targets)
        == sorted(sources)
        == [
            "qwen_moe_mlp/feedforward_gate_dense/kernel",
            "qwen_moe_mlp/feedforward_intermediate_dense/kernel",
            "qwen_moe_mlp/feedforward_output_dense/kernel",
        ]
    )
    for path, value in sources.items():
        targets[path].assign(value)
    actual = keras.ops.convert_to_numpy(ours(x))
    np.testing.assert_allclose(actual, stored["outputs"], atol=1e-6)
    # The comparison is sharp: the gate and intermediate swapped differ.
    targets["qwen_moe_mlp/feedforward_gate_dense/kernel"].assign(
        sources["qwen_moe_mlp/feedforward_intermediate_dense/kernel"]
    )
    targets["qwen_moe_mlp/feedforward_intermediate_dense/kernel"].assign(
        sources["qwen_moe_mlp/feedforward_gate_dense/kernel"]
    )
    swapped = keras.ops.convert_to_numpy(ours(x))
    assert np.abs(swapped - stored["outputs"]).max() > 1e-2


def test_config_round_trips_with_renamed_sublayers():
    layer = GatedFeedForward(
        WIDTH,
        activation="gelu",
        use_bias=True,
        sublayer_names={"output": "down"},
        name="mlp",
    )
    clone = GatedFeedForward.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    clone.build((None, None, HIDDEN))
    assert {v.path: tuple(v.shape) for v in clone.weights} == {
        "mlp/feedforward_intermediate_dense/kernel": (HIDDEN, WIDTH),
        "mlp/feedforward_intermediate_dense/bias": (WIDTH,),
        "mlp/feedforward_gate_dense/kernel": (HIDDEN, WIDTH),
        "mlp/feedforward_gate_dense/bias": (WIDTH,),
        "mlp/down/kernel": (WIDTH, HIDDEN),
        "mlp/down/bias": (HIDDEN,),
    }


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(intermediate_dim=0), ["intermediate_dim=0", "positive integer"]),
        (
            dict(intermediate_dim=4, sublayer_names={"up": "x"}),
            ["'up'", "valid keys"],
        ),
    ],
)
def test_invalid_arguments_are_named(kwargs, words):
    with pytest.raises(ValueError) as error:
        GatedFeedForward(**kwargs)
    for word in words:
        assert word in str(error.value)
