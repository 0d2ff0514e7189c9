"""Built-in Qwen 2.5 preset configs (configs only: no weights are bundled).

Shapes follow the keras-hub checkpoints; RoPE base, norm epsilon and window
size are those of the Hugging Face configs the checkpoints were converted
from (none of them uses the sliding window).
"""

_QWEN2_5 = {
    "rope_max_wavelength": 1000000,
    "layer_norm_epsilon": 1e-6,
    "use_sliding_window_attention": False,
}

QWEN_PRESETS = {
    "qwen2.5_0.5b_en": {
        "vocabulary_size": 151936,
        "num_layers": 24,
        "num_query_heads": 14,
        "num_key_value_heads": 2,
        "hidden_dim": 896,
        "intermediate_dim": 4864,
        "tie_word_embeddings": True,
        "sliding_window_size": 32768,
        **_QWEN2_5,
    },
    "qwen2.5_3b_en": {
        "vocabulary_size": 151936,
        "num_layers": 36,
        "num_query_heads": 16,
        "num_key_value_heads": 2,
        "hidden_dim": 2048,
        "intermediate_dim": 11008,
        "tie_word_embeddings": True,
        "sliding_window_size": 32768,
        **_QWEN2_5,
    },
    # keras-hub's metadata says 6,993,420,288 parameters; this config (that
    # of the Hugging Face checkpoint) has 7,615,616,512.
    "qwen2.5_7b_en": {
        "vocabulary_size": 152064,
        "num_layers": 28,
        "num_query_heads": 28,
        "num_key_value_heads": 4,
        "hidden_dim": 3584,
        "intermediate_dim": 18944,
        "tie_word_embeddings": False,
        "sliding_window_size": 131072,
        **_QWEN2_5,
    },
}
