"""MixtralBackbone equals keras-hub's (the oracle) on tiny configs."""

import re

import keras
import keras_hub
import numpy as np
import pytest

from keras_nlp.models.mixtral.mixtral_backbone import MixtralBackbone
from tests.models.backbone_checks import random_inputs

VOCAB = 97
BASE = dict(vocabulary_size=VOCAB, num_layers=2, hidden_dim=32)
# name -> (query heads, key/value heads, experts, top_k, options). Inputs
# have 12 tokens, so windows below 12 cut the later tokens' view.
CASES = {
    "e4_top2_gqa_4_2_window_5": (4, 2, 4, 2, dict(sliding_window=5)),
    "e3_top1_mqa_4_1_window_3": (4, 1, 3, 1, dict(sliding_window=3)),
    "e8_top2_mha_4_4_no_window": (4, 4, 8, 2, dict(sliding_window=None)),
    # Every expert kept: renormalizing gives back the full softmax.
    "e4_top4_gqa_8_2": (8, 2, 4, 4, dict(sliding_window=6)),
    "e4_top2_options": (
        4,
        2,
        4,
        2,
        dict(
            sliding_window=4,
            rope_max_wavelength=100,
            rope_scaling_factor=2.0,
            layer_norm_epsilon=1e-3,
            router_aux_loss_coef=0.1,
            router_jitter_noise=0.1,
            dropout=0.1,
        ),
    ),
}


def make_config(name, intermediate_dim=24):
    num_query_heads, num_key_value_heads, experts, top_k, options = CASES[name]
    return dict(
        BASE,
        intermediate_dim=intermediate_dim,
        num_query_heads=num_query_heads,
        num_key_value_heads=num_key_value_heads,
        num_experts=experts,
        top_k=top_k,
        **options,
    )


def ours_path(oracle_path):
    # keras-hub's MoE blocks take Keras auto names, unique per session
    # (mixtral_sparse_moe_block, _1, _2, ...); ours have the reference's
    # stable name in every layer.
    return re.sub(
        r"mixtral_sparse_moe_block_\d+/",
        "mixtral_sparse_moe_block/",
        oracle_path,
    )


def copy_oracle_weights(oracle, ours, seed=0):
    """Gives both models the same random weights.

    Norm scales are randomized as `copy_weights_by_path` does; kernels get
    unit-scale outputs so attention and routing are far from uniform.
    """
    rng = np.random.default_rng(seed)
    targets = {v.path: v for v in ours.weights}
    sources = {ours_path(v.path): v for v in oracle.weights}
    assert sorted(sources) == sorted(targets)
    for path, variable in sources.items():
        shape = tuple(variable.shape)
        assert tuple(targets[path].shape) == shape, path
        if len(shape) == 1:
            value = rng.normal(0.0, 0.5, shape)
        else:
            fan_in = 1 if path.endswith("embeddings") else shape[-2]
            if "attention_output" in path:
                fan_in = shape[0] * shape[1]
            value = rng.normal(0.0, fan_in**-0.5, shape)
        variable.assign(value.astype("float32"))
        targets[path].assign(value.astype("float32"))


def make_pair(ours_config, oracle_config=None, seed=0):
    keras.utils.set_random_seed(seed)
    oracle = keras_hub.models.MixtralBackbone(**(oracle_config or ours_config))
    ours = MixtralBackbone(**ours_config)
    copy_oracle_weights(oracle, ours, seed)
    return ours, oracle


def real_token_diff(ours, oracle, inputs, check=False):
    """Max |difference| over real tokens; with `check`, asserts closeness.

    A padding query attends to no real key; keras-hub's CPU path (masked
    softmax) then averages with the raw logits and ours uniformly, so only
    real tokens are comparable (they never attend to padding).
    """
    actual = keras.ops.convert_to_numpy(ours(inputs))
    expected = keras.ops.convert_to_numpy(oracle(inputs))
    assert actual.shape == expected.shape
    assert np.all(np.isfinite(actual))
    real = inputs["padding_mask"].astype(bool)
    if check:
        np.testing.assert_allclose(
            actual[real], expected[real], atol=1e-5, rtol=1e-5
        )
    return float(np.max(np.abs(actual[real] - expected[real])))


@pytest.mark.parametrize("name", list(CASES))
def test_outputs_equal_keras_hub(name):
    ours, oracle = make_pair(make_config(name))
    diff = real_token_diff(ours, oracle, random_inputs(VOCAB), check=True)
    print(f"{name}: max |ours - keras_hub| = {diff:.2e}")


@pytest.mark.parametrize(
    "name", ["e4_top2_gqa_4_2_window_5", "e3_top1_mqa_4_1_window_3"]
)
def test_training_aux_loss_equals_keras_hub(name):
    config = dict(make_config(name), router_aux_loss_coef=0.05)
    ours, oracle = make_pair(config)
    inputs = random_inputs(VOCAB)
    # No dropout or jitter: training differs from inference only by the
    # load-balancing losses, one per block, padding excluded.
    ours(inputs, training=True)
    oracle(inputs, training=True)
    assert len(ours.losses) == len(oracle.losses) == 2
    np.testing.assert_allclose(
        [float(loss) for loss in ours.losses],
        [float(loss) for loss in oracle.losses],
        rtol=1e-5,
    )


def test_jitter_noise_only_in_training():
    config = make_config("e4_top2_gqa_4_2_window_5")
    config["router_jitter_noise"] = 0.2
    ours, oracle = make_pair(config)
    inputs = random_inputs(VOCAB)
    real_token_diff(ours, oracle, inputs, check=True)
    train = keras.ops.convert_to_numpy(ours(inputs, training=True))
    infer = keras.ops.convert_to_numpy(ours(inputs))
    assert not np.allclose(train, infer)


@pytest.mark.parametrize(
    "ours_override, oracle_override",
    [
        ({"top_k": 1}, {"top_k": 2}),
        ({"sliding_window": 4}, {"sliding_window": 5}),
    ],
)
def test_the_comparison_detects_wrong_routing_or_window(
    ours_override, oracle_override
):
    config = make_config("e4_top2_gqa_4_2_window_5")
    ours, oracle = make_pair(
        {**config, **ours_override}, {**config, **oracle_override}
    )
    assert real_token_diff(ours, oracle, random_inputs(VOCAB)) > 1e-3


def test_the_comparison_detects_swapped_gate_and_intermediate():
    ours, oracle = make_pair(make_config("e4_top2_gqa_4_2_window_5"))
    inputs = random_inputs(VOCAB)
    real_token_diff(ours, oracle, inputs, check=True)
    experts = ours.transformer_layers[0].feedforward.experts
    gate = keras.ops.convert_to_numpy(experts.gate)
    experts.gate.assign(keras.ops.convert_to_numpy(experts.intermediate))
    experts.intermediate.assign(gate)
    assert real_token_diff(ours, oracle, inputs) > 1e-3
