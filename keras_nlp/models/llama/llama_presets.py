"""Built-in Llama 2 preset configs (configs only: no weights are bundled)."""

LLAMA_PRESETS = {
    "llama2_7b_en": {
        "vocabulary_size": 32000,
        "num_layers": 32,
        "num_query_heads": 32,
        "num_key_value_heads": 32,
        "hidden_dim": 4096,
        "intermediate_dim": 11008,
        "rope_max_wavelength": 10000,
        "layer_norm_epsilon": 1e-5,
        "tie_word_embeddings": False,
    },
}
