"""Built-in Mistral preset configs (configs only: no weights are bundled)."""

MISTRAL_PRESETS = {
    # Mistral 7B v0.1: 4096-token sliding window on every layer.
    "mistral_7b_en": {
        "vocabulary_size": 32000,
        "num_layers": 32,
        "num_query_heads": 32,
        "num_key_value_heads": 8,
        "hidden_dim": 4096,
        "intermediate_dim": 14336,
        "rope_max_wavelength": 10000,
        "layer_norm_epsilon": 1e-5,
        "sliding_window": 4096,
    },
    # v0.3 extends the vocabulary and drops the window for full attention
    # over a 32k context with a slower RoPE.
    "mistral_0.3_7b_en": {
        "vocabulary_size": 32768,
        "num_layers": 32,
        "num_query_heads": 32,
        "num_key_value_heads": 8,
        "hidden_dim": 4096,
        "intermediate_dim": 14336,
        "rope_max_wavelength": 1000000,
        "layer_norm_epsilon": 1e-5,
        "sliding_window": None,
    },
}
