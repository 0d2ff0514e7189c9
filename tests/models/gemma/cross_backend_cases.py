"""Cases for the JAX/TensorFlow parity test and the script making its golden.

Weights are drawn from a NumPy generator seeded by each variable's path, so
every backend builds bit-identical weights without sharing files.
"""

import zlib

import numpy as np

CASES = {
    # Multi-query attention through `ops.dot_product_attention`.
    "mqa_gemma1": dict(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=8,
        num_key_value_heads=1,
        hidden_dim=32,
        intermediate_dim=96,
        head_dim=8,
    ),
    # Grouped-query attention through the explicit soft-capped path.
    "gqa_gemma2": dict(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=8,
        num_key_value_heads=4,
        hidden_dim=32,
        intermediate_dim=96,
        head_dim=8,
        use_post_ffw_norm=True,
        use_post_attention_norm=True,
        attention_logit_soft_cap=1.0,
        final_logit_soft_cap=0.5,
        use_sliding_window_attention=True,
        sliding_window_size=3,
        query_head_dim_normalize=False,
    ),
}


def case_inputs():
    rng = np.random.default_rng(0)
    token_ids = rng.integers(1, 64, (3, 9)).astype("int32")
    padding_mask = np.ones((3, 9), "int32")
    padding_mask[1, :4] = 0
    token_ids[1, :4] = 0
    return {"token_ids": token_ids, "padding_mask": padding_mask}


def assign_path_seeded_weights(model):
    for variable in model.weights:
        rng = np.random.default_rng(zlib.crc32(variable.path.encode()))
        scale = 0.5 if variable.path.endswith("/scale") else 0.2
        value = rng.normal(0.0, scale, tuple(variable.shape))
        variable.assign(value.astype("float32"))
