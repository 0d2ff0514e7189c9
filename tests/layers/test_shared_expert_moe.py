"""SharedExpertSparseMoE: keras-hub's Qwen MoE block, paths, config, rules."""

import re

import keras
import numpy as np
import pytest
from keras_hub.src.models.qwen_moe.qwen_moe_decoder import QwenSparseMoeBlock

from keras_nlp.distribution.dims import declared_dims
from keras_nlp.layers.shared_expert_moe import SharedExpertSparseMoE
from keras_nlp.layers.shared_expert_moe import shared_expert_moe_rules

HIDDEN, WIDTH, SHARED = 8, 6, 10


def inputs(batch=2, length=7, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(batch, length, HIDDEN)).astype("float32")


def block(**kwargs):
    layer = SharedExpertSparseMoE(
        num_experts=4,
        intermediate_dim=WIDTH,
        shared_intermediate_dim=SHARED,
        fused_gate_intermediate=True,
        name="qwen_sparse_moe_block",
        **kwargs,
    )
    layer.build((None, None, HIDDEN))
    return layer


@pytest.mark.parametrize("normalize", [False, True])
def test_outputs_and_aux_loss_equal_keras_hubs_qwen_moe_block(normalize):
    x = inputs()
    oracle = QwenSparseMoeBlock(
        HIDDEN,
        WIDTH,
        SHARED,
        num_experts=4,
        top_k=2,
        norm_top_k_prob=normalize,
        router_aux_loss_coefficient=0.1,
    )
    oracle.build(x.shape)
    ours = block(top_k=2, normalize_top_k=normalize, router_aux_loss_coef=0.1)
    # keras-hub's block takes an auto name (`..._block_3`): compare the
    # paths below it.
    targets = {v.path.split("/", 1)[1]: v for v in ours.weights}
    sources = {v.path.split("/", 1)[1]: v for v in oracle.weights}
    assert sorted(targets) == sorted(sources)
    rng = np.random.default_rng(0)
    for path, variable in sources.items():
        assert tuple(targets[path].shape) == tuple(variable.shape), path
        value = rng.normal(0, variable.shape[-2] ** -0.5, variable.shape)
        variable.assign(value.astype("float32"))
        targets[path].assign(variable)
    expected, _ = oracle(x, training=True)
    actual = ours(x, training=True)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(actual),
        keras.ops.convert_to_numpy(expected),
        atol=1e-5,
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        [float(loss) for loss in ours.losses],
        [float(loss) for loss in oracle.losses],
        rtol=1e-5,
    )
    # The shared expert counts: without its gate the outputs differ.
    ours.shared_expert_gate.kernel.assign(np.full((HIDDEN, 1), -30.0))
    gap = keras.ops.convert_to_numpy(ours(x)) - keras.ops.convert_to_numpy(
        expected
    )
    assert np.abs(gap).max() > 1e-2


def test_paths_config_round_trip_and_rules():
    layer = block(top_k=3, normalize_top_k=False, router_aux_loss_coef=0.01)
    prefix = "qwen_sparse_moe_block/"
    shared = prefix + "shared_expert_dense/feedforward_"
    assert {v.path: tuple(v.shape) for v in layer.weights} == {
        prefix + "sparse_feedforward_gate_dense/kernel": (HIDDEN, 4),
        prefix + "experts/expert_feedforward_gate_dense": (
            4,
            HIDDEN,
            2 * WIDTH,
        ),
        prefix + "experts/expert_feedforward_output_dense": (4, WIDTH, HIDDEN),
        shared + "intermediate_dense/kernel": (HIDDEN, SHARED),
        shared + "gate_dense/kernel": (HIDDEN, SHARED),
        shared + "output_dense/kernel": (SHARED, HIDDEN),
        prefix + "shared_expert_gate_dense/kernel": (HIDDEN, 1),
    }
    config = layer.get_config()
    clone = SharedExpertSparseMoE.from_config(config)
    assert clone.get_config() == config
    assert (clone.shared_intermediate_dim, clone.top_k) == (SHARED, 3)
    # Each variable matches one rule, which names its declared dimensions.
    rules = shared_expert_moe_rules(prefix, fused_gate_intermediate=True)
    dims = declared_dims(layer)
    for variable in layer.weights:
        (rule,) = [r for r in rules if re.fullmatch(r[0], variable.path)]
        assert rule[2] == dims[variable.path], variable.path
    gate_rule = rules[-1]
    assert gate_rule[1] == (None, None)


def test_invalid_shared_width_is_named():
    with pytest.raises(ValueError, match="shared_intermediate_dim=0"):
        SharedExpertSparseMoE(4, WIDTH, shared_intermediate_dim=0)
