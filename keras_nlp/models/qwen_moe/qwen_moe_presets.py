"""Built-in Qwen 1.5 MoE preset configs (configs only: no weights are
bundled).

Shapes follow the keras-hub checkpoint; RoPE base, norm epsilon, routing
and window options are those of the Hugging Face config it was converted
from (every block sparse, no sliding window).
"""

QWEN_MOE_PRESETS = {
    # Qwen1.5-MoE-A2.7B: 60 routed experts (top 4, not renormalized) and a
    # shared expert in every block; 14.3B parameters, 2.7B active.
    "qwen1.5_moe_2.7b_en": {
        "vocabulary_size": 151936,
        "num_layers": 24,
        "num_query_heads": 16,
        "num_key_value_heads": 16,
        "hidden_dim": 2048,
        "intermediate_dim": 5632,
        "moe_intermediate_dim": 1408,
        "shared_expert_intermediate_dim": 5632,
        "num_experts": 60,
        "top_k": 4,
        "norm_top_k_prob": False,
        "decoder_sparse_step": 1,
        "rope_max_wavelength": 1000000,
        "layer_norm_epsilon": 1e-6,
        "tie_word_embeddings": False,
        "use_sliding_window_attention": False,
        "sliding_window_size": 32768,
        "router_aux_loss_coefficient": 0.001,
    },
}
