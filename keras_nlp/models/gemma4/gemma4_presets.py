"""Built-in Gemma 4 preset configs (text backbone only; no weights).

keras-hub's Gemma 4 presets name the checkpoints (E2B, E4B, 26B-A4B, 31B)
but store their configs with the weights; the values here are the text
configs of the published Hugging Face checkpoints (`text_config` of
their `config.json`). Every size: 262144 tokens, head_dim 256 on the
sliding layers and 512 on the global ones (whose RoPE, wavelength 1M,
turns a quarter of each head), a final logit soft cap of 30.
"""

_GEMMA4_OPTIONS = {
    "vocabulary_size": 262144,
    "image_size": None,
    "head_dim": 256,
    "global_head_dim": 512,
    "final_logit_soft_cap": 30.0,
    "use_sliding_window_attention": True,
    "layer_norm_epsilon": 1e-6,
    "local_rope_wavelength": 10_000.0,
    "global_rope_wavelength": 1_000_000.0,
    "global_rope_partial_rotary_factor": 0.25,
}


def _layer_types(num_layers, period):
    """`period - 1` sliding layers, then a global one, repeated."""
    return [
        "full_attention" if i % period == period - 1 else "sliding_attention"
        for i in range(num_layers)
    ]


GEMMA4_PRESETS = {
    # E2B: per-layer inputs, the last 20 layers reuse earlier keys and
    # values (and have twice as wide feed-forwards).
    "gemma4_2b": {
        **_GEMMA4_OPTIONS,
        "num_layers": 35,
        "num_query_heads": 8,
        "num_key_value_heads": 1,
        "hidden_dim": 1536,
        "intermediate_dim": 6144,
        "sliding_window_size": 512,
        "sliding_window_pattern": 5,
        "layer_types": _layer_types(35, 5),
        "num_kv_shared_layers": 20,
        "hidden_size_per_layer_input": 256,
        "vocab_size_per_layer_input": 262144,
        "use_double_wide_mlp": True,
    },
    # E4B: per-layer inputs, the last 18 layers share keys and values.
    "gemma4_4b": {
        **_GEMMA4_OPTIONS,
        "num_layers": 42,
        "num_query_heads": 8,
        "num_key_value_heads": 2,
        "hidden_dim": 2560,
        "intermediate_dim": 10240,
        "sliding_window_size": 512,
        "layer_types": _layer_types(42, 6),
        "num_kv_shared_layers": 18,
        "hidden_size_per_layer_input": 256,
        "vocab_size_per_layer_input": 262144,
    },
    # 26B-A4B: a dense feed-forward beside 128 experts (8 per token) in
    # every layer; global layers with 2 key/value heads (keys as values).
    "gemma4_26b_a4b": {
        **_GEMMA4_OPTIONS,
        "num_layers": 30,
        "num_query_heads": 16,
        "num_key_value_heads": 8,
        "hidden_dim": 2816,
        "intermediate_dim": 2112,
        "sliding_window_size": 1024,
        "layer_types": _layer_types(30, 6),
        "num_global_key_value_heads": 2,
        "use_vision_bidirectional_attention": False,
        "enable_moe_block": True,
        "num_experts": 128,
        "expert_intermediate_dim": 704,
        "num_experts_per_token": 8,
    },
    # 31B: dense; global layers with 4 key/value heads (keys as values).
    "gemma4_31b": {
        **_GEMMA4_OPTIONS,
        "num_layers": 60,
        "num_query_heads": 32,
        "num_key_value_heads": 16,
        "hidden_dim": 5376,
        "intermediate_dim": 21504,
        "sliding_window_size": 1024,
        "layer_types": _layer_types(60, 6),
        "num_global_key_value_heads": 4,
    },
}
