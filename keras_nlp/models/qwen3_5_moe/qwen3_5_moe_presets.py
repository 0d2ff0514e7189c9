"""Built-in Qwen 3.5 MoE preset configs (configs only: no weights).

keras-hub 0.32 lists these presets without their configs; the sizes here
are the Hugging Face `text_config` of Qwen3.5-35B-A3B (written from
memory): they give 34,660,610,688 parameters, keras-hub's count for its
text-only `qwen_agent_world_35b_a3b` (its other presets add a vision
encoder). Every fourth block is full attention.
"""


def _every_fourth_full(num_layers):
    return [
        "full_attention" if (i + 1) % 4 == 0 else "linear_attention"
        for i in range(num_layers)
    ]


_35B_A3B = {
    "vocabulary_size": 248320,
    "num_layers": 40,
    "layer_types": _every_fourth_full(40),
    "num_query_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "hidden_dim": 2048,
    "moe_intermediate_dim": 512,
    "shared_expert_intermediate_size": 512,
    "num_experts": 256,
    "top_k": 8,
    "partial_rotary_factor": 0.25,
    "rope_max_wavelength": 10000000,
    "layer_norm_epsilon": 1e-6,
    "tie_word_embeddings": False,
    "sliding_window_size": None,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "mrope_section": [11, 11, 10],
}

QWEN3_5_MOE_PRESETS = {
    "qwen3_5_moe_35b_a3b_base": dict(_35B_A3B),
    "qwen3_5_moe_35b_a3b": dict(_35B_A3B),
    "qwen3_6_moe_35b_a3b": dict(_35B_A3B),
    "qwen_agent_world_35b_a3b": dict(_35B_A3B),
}
