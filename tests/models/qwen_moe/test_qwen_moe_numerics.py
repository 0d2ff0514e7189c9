"""QwenMoeBackbone equals keras-hub's (the oracle) on tiny configs.

keras-hub's Qwen MoE attention applies its sliding window on its explicit
path, which it takes on CPU, so window cases need no pinning here.

keras-hub builds every block as if it were block 0 (it never passes the
block's index), so `mlp_only_layers=[0]` or `decoder_sparse_step=2` make
all its blocks dense; ours follow each block's index, as the Hugging Face
model does. The dense-block case therefore has one block.
"""

import keras
import numpy as np
import pytest

from keras_nlp.models.qwen_moe.qwen_moe_backbone import QwenMoeBackbone
from tests.models.backbone_checks import random_inputs
from tests.models.backbone_checks import unit_scale_pair

VOCAB = 97
BASE = dict(
    vocabulary_size=VOCAB,
    num_layers=2,
    hidden_dim=32,
    intermediate_dim=40,
    moe_intermediate_dim=12,
    shared_expert_intermediate_dim=24,
)
CASES = {
    # Probabilities kept as routed (keras-hub's default).
    "e4_top2_gqa_4_2": dict(
        num_query_heads=4, num_key_value_heads=2, num_experts=4, top_k=2
    ),
    # Renormalized routing, a window shorter than the 12 tokens, tied
    # embeddings and non-default RoPE and norm options.
    "e6_top3_mha_4_4_normalized_window_4": dict(
        num_query_heads=4,
        num_key_value_heads=4,
        num_experts=6,
        top_k=3,
        norm_top_k_prob=True,
        use_sliding_window_attention=True,
        sliding_window_size=4,
        tie_word_embeddings=True,
        rope_max_wavelength=100,
        rope_scaling_factor=2.0,
        layer_norm_epsilon=1e-3,
    ),
    # One dense block (see the module docstring).
    "dense_block": dict(
        num_layers=1,
        num_query_heads=8,
        num_key_value_heads=1,
        num_experts=4,
        top_k=2,
        mlp_only_layers=[0],
    ),
}


def make_pair(config, seed=0):
    """Ours and keras-hub's, with the same unit-scale random weights."""
    # keras-hub's feed-forward blocks take Keras auto names.
    return unit_scale_pair(
        QwenMoeBackbone, config, ("qwen_sparse_moe_block", "qwen_moe_mlp"), seed
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
    assert len(ours.losses) == len(oracle.losses)
    np.testing.assert_allclose(
        [float(loss) for loss in ours.losses],
        [float(loss) for loss in oracle.losses],
        rtol=1e-5,
    )
