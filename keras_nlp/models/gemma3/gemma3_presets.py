"""Built-in Gemma 3 preset configs (configs only: no weights are bundled).

Values match the published Gemma 3 checkpoints in the keras-hub format:
the text-only sizes, and the multimodal 4B, 12B and 27B with their vision
encoder.
"""

# Shared by every Gemma 3 size: q/k norms, Gemma 2's post-norms, no logit
# soft caps, and sliding-window attention on five of every six layers.
_GEMMA3_OPTIONS = {
    "image_size": 896,
    "query_head_dim_normalize": True,
    "use_query_key_norm": True,
    "use_post_ffw_norm": True,
    "use_post_attention_norm": True,
    "attention_logit_soft_cap": None,
    "final_logit_soft_cap": None,
    "use_sliding_window_attention": True,
    "layer_norm_epsilon": 1e-6,
}

# The 128k-context sizes (4B and up) stretch the global layers' RoPE
# positions 8x (linear scaling); 270M and 1B (32k context) do not.
_LONG_CONTEXT = {
    "local_rope_scaling_factor": 1.0,
    "global_rope_scaling_factor": 8.0,
}

GEMMA3_PRESETS = {
    "gemma3_270m": {
        "vocabulary_size": 262144,
        "num_layers": 18,
        "num_query_heads": 4,
        "num_key_value_heads": 1,
        "hidden_dim": 640,
        "intermediate_dim": 2048,
        "head_dim": 256,
        **_GEMMA3_OPTIONS,
        "sliding_window_size": 512,
    },
    "gemma3_1b": {
        "vocabulary_size": 262144,
        "num_layers": 26,
        "num_query_heads": 4,
        "num_key_value_heads": 1,
        "hidden_dim": 1152,
        "intermediate_dim": 6912,
        "head_dim": 256,
        **_GEMMA3_OPTIONS,
        "sliding_window_size": 512,
    },
    "gemma3_4b_text": {
        "vocabulary_size": 262144,
        "num_layers": 34,
        "num_query_heads": 8,
        "num_key_value_heads": 4,
        "hidden_dim": 2560,
        "intermediate_dim": 10240,
        "head_dim": 256,
        **_GEMMA3_OPTIONS,
        "sliding_window_size": 1024,
        **_LONG_CONTEXT,
    },
    "gemma3_12b_text": {
        "vocabulary_size": 262144,
        "num_layers": 48,
        "num_query_heads": 16,
        "num_key_value_heads": 8,
        "hidden_dim": 3840,
        "intermediate_dim": 15360,
        "head_dim": 256,
        **_GEMMA3_OPTIONS,
        "sliding_window_size": 1024,
        **_LONG_CONTEXT,
    },
    "gemma3_27b_text": {
        "vocabulary_size": 262144,
        "num_layers": 62,
        "num_query_heads": 32,
        "num_key_value_heads": 16,
        "hidden_dim": 5376,
        "intermediate_dim": 21504,
        "head_dim": 128,
        **_GEMMA3_OPTIONS,
        # Queries are scaled by (hidden_dim / num_query_heads) ** -0.5 =
        # 168 ** -0.5, not head_dim ** -0.5.
        "query_head_dim_normalize": False,
        "sliding_window_size": 1024,
        **_LONG_CONTEXT,
    },
}


def _with_vision(text_preset):
    """A multimodal preset: the text preset plus the SigLIP So400m encoder
    (896-pixel images, 14-pixel patches, 4x4 pooling: 256 soft tokens per
    image) projected to its hidden width."""
    config = dict(GEMMA3_PRESETS[text_preset])
    config["vision_encoder"] = {
        "image_size": 896,
        "patch_size": 14,
        "num_heads": 16,
        "hidden_dim": 1152,
        "num_layers": 27,
        "intermediate_dim": 4304,
        "output_dim": config["hidden_dim"],
        "pool_size": 4,
        "layer_norm_epsilon": 1e-6,
    }
    return config


# keras-hub's multimodal sizes (parameter counts checked against its
# listing: 4299915632, 12187079280, 27432062576).
GEMMA3_PRESETS.update(
    {
        "gemma3_4b": _with_vision("gemma3_4b_text"),
        "gemma3_12b": _with_vision("gemma3_12b_text"),
        "gemma3_27b": _with_vision("gemma3_27b_text"),
    }
)
