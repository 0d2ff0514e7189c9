"""GptOssBackbone equals keras-hub's (the oracle) on tiny configs."""

import keras
import numpy as np
import pytest
from keras_hub.src.layers.modeling.rotary_embedding import (
    RotaryEmbedding as KerasHubRotaryEmbedding,
)

from keras_nlp.models.gpt_oss.gpt_oss_backbone import GptOssBackbone
from keras_nlp.models.gpt_oss.yarn_rotary_embedding import YarnRotaryEmbedding
from tests.models.backbone_checks import random_inputs
from tests.models.backbone_checks import unit_scale_oracle

VOCAB = 97
# Two blocks: block 0 attends to the whole prefix, block 1 through the
# window. Inputs have 12 tokens, so windows below 11 cut the later tokens'
# view.
CASES = {
    # YaRN (32x), heads * head_dim (64) wider than hidden (32), window 3.
    "e4_top2_gqa_4_2_yarn_window_3": dict(
        num_query_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_experts=4,
        top_k=2,
        sliding_window=3,
        rope_max_wavelength=150000,
        rope_scaling_factor=32.0,
        layer_norm_epsilon=1e-5,
    ),
    # Multi-query, one expert per token, plain RoPE, no window.
    "e3_top1_mqa_4_1_no_window": dict(
        num_query_heads=4,
        num_key_value_heads=1,
        num_experts=3,
        top_k=1,
        sliding_window=None,
    ),
}
# The experts' weights at 3x unit scale: some gate and up values pass the
# clamp at 7 (checked below).
EXPERT_SCALE = 3.0


def make_config(name):
    return dict(
        vocabulary_size=VOCAB,
        num_layers=2,
        hidden_dim=32,
        intermediate_dim=16,
        **CASES[name],
    )


@pytest.fixture(scope="module")
def pairs():
    """Case name -> (ours, oracle) with the oracle's unit-scale weights."""
    built = {}
    for name in CASES:
        config = make_config(name)
        scales = {
            f"transformer_layer_{i}/sparse_moe_block/experts/": EXPERT_SCALE
            * config["hidden_dim"] ** -0.5
            for i in range(2)
        }
        oracle = unit_scale_oracle("GptOssBackbone", config, scales=scales)
        ours = GptOssBackbone(**config)
        weights = {v.path: v for v in ours.weights}
        assert sorted(weights) == sorted(v.path for v in oracle.weights)
        for variable in oracle.weights:
            weights[variable.path].assign(keras.ops.convert_to_numpy(variable))
        built[name] = ours, oracle
    return built


def outputs(model, inputs):
    """`model(inputs)` compiled as one program (eager calls compile op by
    op, several times slower); traced anew on every call."""
    if keras.backend.backend() != "jax":
        return keras.ops.convert_to_numpy(model(inputs))
    import jax

    compiled = jax.jit(lambda t, n, x: model.stateless_call(t, n, x)[0])
    return np.asarray(
        compiled(
            [v.value for v in model.trainable_variables],
            [v.value for v in model.non_trainable_variables],
            inputs,
        )
    )


@pytest.mark.parametrize("name", list(CASES))
def test_outputs_equal_keras_hub(name, pairs):
    ours, oracle = pairs[name]
    inputs = random_inputs(VOCAB)
    actual, expected = outputs(ours, inputs), outputs(oracle, inputs)
    # Every position, padding included: with sinks a query that sees no
    # key has a defined output (its weight all goes to the sinks).
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-5)


def test_the_clamp_engages_and_the_comparison_sees_it(pairs):
    # Were no gate or up value past the limit, the clamp would change
    # nothing.
    ours, _ = pairs["e4_top2_gqa_4_2_yarn_window_3"]
    inputs = random_inputs(VOCAB)
    expected = outputs(ours, inputs)
    for layer in ours.transformer_layers:
        layer.feedforward.experts.clamp_limit = None
    try:
        assert np.abs(outputs(ours, inputs) - expected).max() > 1e-3
    finally:
        for layer in ours.transformer_layers:
            layer.feedforward.experts.clamp_limit = 7.0


@pytest.mark.parametrize("truncate", [True, False])
@pytest.mark.parametrize("factor", [1.0, 32.0])
def test_yarn_equals_keras_hub_rotary_embedding(factor, truncate):
    options = dict(
        max_wavelength=150000,
        original_max_position_embeddings=64,
        beta_fast=32.0,
        beta_slow=1.0,
        truncate=truncate,
    )
    ours = YarnRotaryEmbedding(factor=factor, **options)
    oracle = KerasHubRotaryEmbedding(
        scaling_factor=factor, rope_type="yarn", **options
    )
    x = np.random.default_rng(0).normal(size=(2, 300, 3, 64)).astype("float32")
    # Angles reach ~300 radians, where a float32 ulp is 3e-5: the two
    # orders of computing them differ by a few ulps on some backends.
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(ours(x, start_index=5)),
        keras.ops.convert_to_numpy(oracle(x, start_index=5)),
        atol=3e-4,
    )
    clone = YarnRotaryEmbedding.from_config(ours.get_config())
    assert clone.get_config() == ours.get_config()
