"""Built-in Gemma preset configs (configs only: no weights are bundled).

Values match the published Gemma checkpoints in the keras-hub format.
"""

_GEMMA_2B = {
    "vocabulary_size": 256000,
    "num_layers": 18,
    "num_query_heads": 8,
    "num_key_value_heads": 1,
    "hidden_dim": 2048,
    "intermediate_dim": 32768,
    "head_dim": 256,
}

_GEMMA_7B = {
    "vocabulary_size": 256000,
    "num_layers": 28,
    "num_query_heads": 16,
    "num_key_value_heads": 16,
    "hidden_dim": 3072,
    "intermediate_dim": 49152,
    "head_dim": 256,
}

# Gemma 2: post-attention/post-ffw norms, logit soft-capping, and a sliding
# window on every other layer.
_GEMMA2_OPTIONS = {
    "query_head_dim_normalize": True,
    "use_post_ffw_norm": True,
    "use_post_attention_norm": True,
    "final_logit_soft_cap": 30.0,
    "attention_logit_soft_cap": 50.0,
    "sliding_window_size": 4096,
    "use_sliding_window_attention": True,
}

GEMMA_PRESETS = {
    "gemma_2b_en": dict(_GEMMA_2B),
    "gemma_instruct_2b_en": dict(_GEMMA_2B),
    "gemma_7b_en": dict(_GEMMA_7B),
    "gemma_instruct_7b_en": dict(_GEMMA_7B),
    "gemma2_2b_en": {
        "vocabulary_size": 256000,
        "num_layers": 26,
        "num_query_heads": 8,
        "num_key_value_heads": 4,
        "hidden_dim": 2304,
        "intermediate_dim": 18432,
        "head_dim": 256,
        **_GEMMA2_OPTIONS,
    },
    "gemma2_9b_en": {
        "vocabulary_size": 256000,
        "num_layers": 42,
        "num_query_heads": 16,
        "num_key_value_heads": 8,
        "hidden_dim": 3584,
        "intermediate_dim": 28672,
        "head_dim": 256,
        **_GEMMA2_OPTIONS,
    },
    "gemma2_27b_en": {
        "vocabulary_size": 256000,
        "num_layers": 46,
        "num_query_heads": 32,
        "num_key_value_heads": 16,
        "hidden_dim": 4608,
        "intermediate_dim": 73728,
        "head_dim": 128,
        **_GEMMA2_OPTIONS,
        "query_head_dim_normalize": False,
    },
}
