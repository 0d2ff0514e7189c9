"""Built-in Qwen 3 preset configs (configs only: no weights are bundled).

Shapes follow the keras-hub checkpoints; RoPE base and norm epsilon are
those of the Hugging Face configs. Those configs disable the sliding window,
so keras-hub's converter sets `sliding_window_size=None`, as here.
"""

_QWEN3 = {
    "head_dim": 128,
    "rope_max_wavelength": 1000000,
    "layer_norm_epsilon": 1e-6,
    "sliding_window_size": None,
}

QWEN3_PRESETS = {
    "qwen3_0.6b_en": {
        "vocabulary_size": 151936,
        "num_layers": 28,
        "num_query_heads": 16,
        "num_key_value_heads": 8,
        "hidden_dim": 1024,
        "intermediate_dim": 3072,
        "tie_word_embeddings": True,
        **_QWEN3,
    },
    "qwen3_8b_en": {
        "vocabulary_size": 151936,
        "num_layers": 36,
        "num_query_heads": 32,
        "num_key_value_heads": 8,
        "hidden_dim": 4096,
        "intermediate_dim": 12288,
        "tie_word_embeddings": False,
        **_QWEN3,
    },
}
