"""Built-in Llama 3 preset configs (configs only: no weights are bundled)."""

# Llama 3.1+ stretch RoPE's slow frequencies for long contexts.
_LLAMA3_2_ROPE = {
    "rope_max_wavelength": 500000,
    "rope_frequency_adjustment_factor": 32.0,
    "rope_low_freq_factor": 1.0,
    "rope_high_freq_factor": 4.0,
    "rope_pretraining_sequence_length": 8192,
    "layer_norm_epsilon": 1e-5,
}

LLAMA3_PRESETS = {
    "llama3_8b_en": {
        "vocabulary_size": 128256,
        "num_layers": 32,
        "num_query_heads": 32,
        "num_key_value_heads": 8,
        "hidden_dim": 4096,
        "intermediate_dim": 14336,
        "rope_max_wavelength": 500000,
        "layer_norm_epsilon": 1e-5,
        "tie_word_embeddings": False,
    },
    "llama3.2_1b": {
        "vocabulary_size": 128256,
        "num_layers": 16,
        "num_query_heads": 32,
        "num_key_value_heads": 8,
        "hidden_dim": 2048,
        "intermediate_dim": 8192,
        "tie_word_embeddings": True,
        **_LLAMA3_2_ROPE,
    },
    "llama3.2_3b": {
        "vocabulary_size": 128256,
        "num_layers": 28,
        "num_query_heads": 24,
        "num_key_value_heads": 8,
        "hidden_dim": 3072,
        "intermediate_dim": 8192,
        "tie_word_embeddings": True,
        **_LLAMA3_2_ROPE,
    },
}
