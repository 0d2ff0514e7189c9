"""Built-in BLOOM preset configs (configs only: no weights are bundled)."""

BLOOM_PRESETS = {
    "bloom_560m_multi": {
        "vocabulary_size": 250880,
        "num_layers": 24,
        "num_heads": 16,
        "hidden_dim": 1024,
        "intermediate_dim": 4096,
        "dropout": 0.0,
        "layer_norm_epsilon": 1e-5,
    },
    "bloom_3b_multi": {
        "vocabulary_size": 250880,
        "num_layers": 30,
        "num_heads": 32,
        "hidden_dim": 2560,
        "intermediate_dim": 10240,
        "dropout": 0.0,
        "layer_norm_epsilon": 1e-5,
    },
}
