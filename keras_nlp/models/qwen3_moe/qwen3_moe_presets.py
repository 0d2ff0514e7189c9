"""Built-in Qwen 3 MoE preset configs (configs only: no weights are
bundled).

Shapes follow the keras-hub checkpoints; RoPE base, norm epsilon and
routing options are those of the Hugging Face configs they were converted
from. Those configs disable the sliding window, so keras-hub's converter
sets `sliding_window_size=None`, as here; every block is sparse.
"""

_QWEN3_MOE = {
    "vocabulary_size": 151936,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_experts": 128,
    "top_k": 8,
    "norm_top_k_prob": True,
    "decoder_sparse_step": 1,
    "rope_max_wavelength": 1000000,
    "layer_norm_epsilon": 1e-6,
    "tie_word_embeddings": False,
    "sliding_window_size": None,
    "router_aux_loss_coefficient": 0.001,
}
# Qwen3-30B-A3B's shapes: 48 blocks, 32:4 heads on a width of 2048.
_QWEN3_MOE_30B = {
    **_QWEN3_MOE,
    "num_layers": 48,
    "num_query_heads": 32,
    "hidden_dim": 2048,
    "intermediate_dim": 6144,
    "moe_intermediate_dim": 768,
}

QWEN3_MOE_PRESETS = {
    # 30.5B parameters, 3.3B active.
    "qwen3_moe_30b_a3b_en": dict(_QWEN3_MOE_30B),
    # 235B parameters, 22B active.
    "qwen3_moe_235b_a22b_en": {
        **_QWEN3_MOE,
        "num_layers": 94,
        "num_query_heads": 64,
        "hidden_dim": 4096,
        "intermediate_dim": 12288,
        "moe_intermediate_dim": 1536,
    },
    # Qwen3-Coder-30B-A3B-Instruct: the 30B shapes, a 10x RoPE base.
    "qwen3_coder_instruct_30b_a3b_en": {
        **_QWEN3_MOE_30B,
        "rope_max_wavelength": 10000000,
    },
}
