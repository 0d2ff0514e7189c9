"""SharedExpertSparseMoE: keras-hub's Qwen MoE block, paths, config, rules.

keras-hub's `QwenSparseMoeBlock` (inputs, weights, outputs and aux loss,
with and without renormalized routing) is stored by
`python -m tests.oracles shared_expert_moe`. The Qwen MoE backbone's live
row in tests/models/oracle_cases.py has only a dense block, so one case
here still builds keras-hub's block live and checks it gives the stored
numbers.
"""

import re

import keras
import numpy as np
import pytest

from keras_nlp.distribution.dims import declared_dims
from keras_nlp.layers.shared_expert_moe import SharedExpertSparseMoE
from keras_nlp.layers.shared_expert_moe import shared_expert_moe_rules
from tests import oracles

HIDDEN, WIDTH, SHARED = 8, 6, 10
DATA = "shared_expert_moe-qwen_sparse_moe_block-normalize_{}"
NORMALIZE = [False, True]
LIVE_NORMALIZE = True


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


def oracle_arrays(normalize):
    """keras-hub's block on `inputs()`: its weights, by the path below the
    block (its name is auto-numbered), outputs and aux losses."""
    from keras_hub.src.models.qwen_moe.qwen_moe_decoder import (
        QwenSparseMoeBlock,
    )

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
    arrays = {"inputs": x}
    rng = np.random.default_rng(0)
    for variable in oracle.weights:
        value = rng.normal(0, variable.shape[-2] ** -0.5, variable.shape)
        variable.assign(value.astype("float32"))
        path = variable.path.split("/", 1)[1]
        arrays[f"weights/{path}"] = value.astype("float32")
    outputs, losses = _training_call(oracle, x)
    arrays["outputs"] = keras.ops.convert_to_numpy(outputs)
    arrays["aux_losses"] = np.array(
        [float(keras.ops.convert_to_numpy(v)) for v in losses], "float32"
    )
    return arrays


def _training_call(layer, x):
    """`layer(x, training=True)`'s outputs and losses; on JAX compiled as
    one program (eagerly, op by op, it takes several times longer)."""
    if keras.backend.backend() != "jax":
        outputs, _ = layer(x, training=True)
        return outputs, layer.losses
    import jax

    (outputs, _), _, losses = jax.jit(
        lambda t, n, x: layer.stateless_call(
            t, n, x, training=True, return_losses=True
        )
    )(
        [v.value for v in layer.trainable_variables],
        [v.value for v in layer.non_trainable_variables],
        x,
    )
    return outputs, losses


def generate_oracle_data():
    return {DATA.format(n): oracle_arrays(n) for n in NORMALIZE}


@pytest.mark.parametrize("normalize", NORMALIZE)
def test_outputs_and_aux_loss_equal_keras_hubs_qwen_moe_block(normalize):
    stored = oracles.load(DATA.format(normalize))
    sources = {k.split("/", 1)[1]: v for k, v in stored.items() if "/" in k}
    x, expected = stored["inputs"], stored["outputs"]
    ours = block(top_k=2, normalize_top_k=normalize, router_aux_loss_coef=0.1)
    targets = {v.path.split("/", 1)[1]: v for v in ours.weights}
    assert sorted(targets) == sorted(sources)
    for path, value in sources.items():
        assert tuple(targets[path].shape) == value.shape, path
        targets[path].assign(value)
    actual = ours(x, training=True)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(actual), expected, atol=1e-5, rtol=1e-5
    )
    np.testing.assert_allclose(
        [float(loss) for loss in ours.losses], stored["aux_losses"], rtol=1e-5
    )
    # The shared expert counts: without its gate the outputs differ.
    ours.shared_expert_gate.kernel.assign(np.full((HIDDEN, 1), -30.0))
    gap = keras.ops.convert_to_numpy(ours(x)) - expected
    assert np.abs(gap).max() > 1e-2


def test_keras_hubs_qwen_moe_block_still_gives_the_stored_outputs():
    name = DATA.format(LIVE_NORMALIZE)
    oracles.assert_oracle_unchanged(name, oracle_arrays(LIVE_NORMALIZE))


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


def test_sublayer_names_rename_the_shared_expert_and_round_trip():
    names = {
        "router": "router_gate",
        "shared_expert": "shared_expert",
        "shared_expert_gate": "shared_expert_gate",
    }
    layer = SharedExpertSparseMoE(
        4, WIDTH, SHARED, top_k=2, sublayer_names=names, name="mlp"
    )
    layer.build((None, None, HIDDEN))
    paths = sorted(v.path for v in layer.weights)
    assert "mlp/shared_expert/feedforward_gate_dense/kernel" in paths
    assert "mlp/shared_expert_gate/kernel" in paths
    assert "mlp/router_gate/kernel" in paths
    config = layer.get_config()
    assert config["sublayer_names"] == names
    assert SharedExpertSparseMoE.from_config(config).get_config() == config
    rules = shared_expert_moe_rules("mlp/", sublayer_names=names)
    for path in paths:
        assert len([r for r in rules if re.fullmatch(r[0], path)]) == 1, path
    with pytest.raises(ValueError, match=r"\['shared'\]; valid keys are .*"):
        SharedExpertSparseMoE(4, WIDTH, SHARED, sublayer_names={"shared": "s"})
    with pytest.raises(ValueError, match=r"\['shared_expert'\]` must be a"):
        SharedExpertSparseMoE(
            4, WIDTH, SHARED, sublayer_names={"shared_expert": "a/b"}
        )
