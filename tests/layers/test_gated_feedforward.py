"""GatedFeedForward: paths, keras-hub's dense Qwen MoE feed-forward, config."""

import keras
import numpy as np
import pytest
from keras_hub.src.models.qwen_moe.qwen_moe_decoder import QwenMoeMLP

from keras_nlp.layers.gated_feedforward import GatedFeedForward

HIDDEN, WIDTH = 8, 12


def test_paths_and_output_equal_keras_hubs_dense_block():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, HIDDEN)).astype("float32")
    oracle = QwenMoeMLP(WIDTH, HIDDEN, name="qwen_moe_mlp")
    oracle.build(x.shape)
    ours = GatedFeedForward(WIDTH, name="qwen_moe_mlp")
    ours.build(x.shape)
    targets = {v.path: v for v in ours.weights}
    assert (
        sorted(targets)
        == sorted(v.path for v in oracle.weights)
        == [
            "qwen_moe_mlp/feedforward_gate_dense/kernel",
            "qwen_moe_mlp/feedforward_intermediate_dense/kernel",
            "qwen_moe_mlp/feedforward_output_dense/kernel",
        ]
    )
    for variable in oracle.weights:
        value = rng.normal(0, variable.shape[0] ** -0.5, variable.shape)
        variable.assign(value.astype("float32"))
        targets[variable.path].assign(variable)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(ours(x)),
        keras.ops.convert_to_numpy(oracle(x)),
        atol=1e-6,
    )


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
