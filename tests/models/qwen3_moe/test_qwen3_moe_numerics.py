"""Qwen3MoeBackbone equals keras-hub's (the oracle) on tiny configs.

As for Qwen 3 (see `tests/models/qwen3/test_qwen3_numerics.py`), keras-hub's
attention drops the sliding window on its fused path (JAX, torch) and
applies it on its explicit one: these tests pin the explicit path.
"""

import keras
import keras_hub.src.models.qwen3_moe.qwen3_moe_attention as oracle_attention
import numpy as np
import pytest

from keras_nlp.models.qwen3_moe.qwen3_moe_backbone import Qwen3MoeBackbone
from tests.models.backbone_checks import random_inputs
from tests.models.backbone_checks import unit_scale_pair

VOCAB = 97
BASE = dict(
    vocabulary_size=VOCAB,
    num_layers=2,
    hidden_dim=32,
    intermediate_dim=40,
    moe_intermediate_dim=12,
)
CASES = {
    # Probabilities kept as routed (keras-hub's default); head_dim * heads
    # (64) twice hidden_dim.
    "e4_top2_gqa_4_2": dict(
        num_query_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_experts=4,
        top_k=2,
    ),
    # Renormalized routing (the presets'), head_dim from hidden_dim, a
    # window shorter than the 12 tokens, tied embeddings, and a norm
    # epsilon that the query/key norms must not take.
    "e6_top3_gqa_8_2_normalized_window_4": dict(
        num_query_heads=8,
        num_key_value_heads=2,
        num_experts=6,
        top_k=3,
        norm_top_k_prob=True,
        sliding_window_size=4,
        tie_word_embeddings=True,
        rope_max_wavelength=100,
        rope_scaling_factor=2.0,
        layer_norm_epsilon=1e-3,
    ),
    # Block 0 dense, block 1 sparse.
    "dense_then_sparse": dict(
        num_query_heads=4,
        num_key_value_heads=1,
        head_dim=8,
        num_experts=4,
        top_k=2,
        norm_top_k_prob=True,
        decoder_sparse_step=2,
        sliding_window_size=None,
    ),
}


@pytest.fixture(autouse=True)
def explicit_oracle_path(monkeypatch):
    """Pins keras-hub's Qwen 3 MoE attention to its explicit path."""
    monkeypatch.setattr(
        oracle_attention, "fused_attention_op_available", lambda: False
    )


def make_pair(config, seed=0):
    """Ours and keras-hub's, with the same unit-scale random weights."""
    # keras-hub's feed-forward blocks take Keras auto names.
    return unit_scale_pair(
        Qwen3MoeBackbone,
        config,
        ("qwen3_sparse_moe_block", "qwen3_moe_mlp"),
        seed,
    )


def real_token_outputs(model, inputs, **kwargs):
    outputs = keras.ops.convert_to_numpy(model(inputs, **kwargs))
    return outputs[inputs["padding_mask"].astype(bool)]


@pytest.mark.parametrize("name", list(CASES))
def test_outputs_and_load_balancing_losses_equal_keras_hub(name):
    config = dict(BASE, router_aux_loss_coefficient=0.05, **CASES[name])
    ours, oracle = make_pair(config)
    inputs = random_inputs(VOCAB)
    expected = real_token_outputs(oracle, inputs)
    actual = real_token_outputs(ours, inputs)
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-5)
    print(f"{name}: max |ours - keras_hub| = {np.abs(actual - expected).max()}")
    # Without dropout, training adds only the load-balancing losses, one
    # per sparse block, padding excluded (the inputs are left-padded).
    real_token_outputs(ours, inputs, training=True)
    real_token_outputs(oracle, inputs, training=True)
    assert len(ours.losses) == len(oracle.losses) > 0
    np.testing.assert_allclose(
        [float(loss) for loss in ours.losses],
        [float(loss) for loss in oracle.losses],
        rtol=1e-5,
    )
