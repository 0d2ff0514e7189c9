"""Built-in Qwen 3.5 preset configs (configs only: no weights are bundled).

keras-hub 0.32 lists these presets without their configs; the sizes here
are the Hugging Face `text_config`s of the checkpoints, written from
memory and checked against keras-hub's parameter counts, which include a
vision encoder whose merger grows by `4 * vision_width + 1` per unit of
our `hidden_dim`: with the 35B-A3B's text count exact (see
`qwen3_5_moe_presets.py`), keras-hub's 9B and 27B counts leave the very
same vision encoder as the 35B-A3B's, and its 2B and 4B counts the same
smaller one for both; the 0.8B's is unchecked. Every fourth block is full
attention; `mrope_section` only matters for image positions, which these
text backbones do not take.
"""


def _every_fourth_full(num_layers):
    return [
        "full_attention" if (i + 1) % 4 == 0 else "linear_attention"
        for i in range(num_layers)
    ]


_QWEN3_5 = {
    "vocabulary_size": 248320,
    "head_dim": 256,
    "partial_rotary_factor": 0.25,
    "rope_max_wavelength": 10000000,
    "layer_norm_epsilon": 1e-6,
    "sliding_window_size": None,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "linear_num_key_heads": 16,
    "mrope_section": [11, 11, 10],
}

_SMALL = {
    "num_layers": 24,
    "layer_types": _every_fourth_full(24),
    "num_query_heads": 8,
    "num_key_value_heads": 2,
}
_0_8B = {
    **_QWEN3_5,
    **_SMALL,
    "hidden_dim": 1024,
    "intermediate_dim": 3584,
    "linear_num_value_heads": 16,
    "tie_word_embeddings": True,
}
_2B = {
    **_QWEN3_5,
    **_SMALL,
    "hidden_dim": 2048,
    "intermediate_dim": 6144,
    "linear_num_value_heads": 16,
    "tie_word_embeddings": True,
}
_MID = {
    "num_layers": 32,
    "layer_types": _every_fourth_full(32),
    "num_query_heads": 16,
    "num_key_value_heads": 4,
}
_4B = {
    **_QWEN3_5,
    **_MID,
    "hidden_dim": 2560,
    "intermediate_dim": 9216,
    "linear_num_value_heads": 32,
    "tie_word_embeddings": True,
}
_9B = {
    **_QWEN3_5,
    **_MID,
    "hidden_dim": 4096,
    "intermediate_dim": 12288,
    "linear_num_value_heads": 32,
    "tie_word_embeddings": False,
}
_27B = {
    **_QWEN3_5,
    "num_layers": 64,
    "layer_types": _every_fourth_full(64),
    "num_query_heads": 24,
    "num_key_value_heads": 4,
    "hidden_dim": 5120,
    "intermediate_dim": 17408,
    "linear_num_value_heads": 48,
    "tie_word_embeddings": False,
}

QWEN3_5_PRESETS = {
    "qwen3_5_0.8b_base": dict(_0_8B),
    "qwen3_5_0.8b": dict(_0_8B),
    "qwen3_5_2b_base": dict(_2B),
    "qwen3_5_2b": dict(_2B),
    "qwen3_5_4b_base": dict(_4B),
    "qwen3_5_4b": dict(_4B),
    "qwen3_5_9b_base": dict(_9B),
    "qwen3_5_9b": dict(_9B),
    "qwen3_5_27b": dict(_27B),
    # Qwen 3.6 and 3.8 share the 27B's shape.
    "qwen3_6_27b": dict(_27B),
    "qwen3_8_27b": dict(_27B),
}
