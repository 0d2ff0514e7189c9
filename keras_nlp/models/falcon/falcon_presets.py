"""Built-in Falcon preset configs (configs only: no weights are bundled)."""

FALCON_PRESETS = {
    # Falcon-RW-1B: ALiBi, multi-head attention, sequential residuals.
    "falcon_refinedweb_1b_en": {
        "vocabulary_size": 50304,
        "num_layers": 24,
        "num_attention_heads": 32,
        "hidden_dim": 2048,
        "intermediate_dim": 8192,
        "layer_norm_epsilon": 1e-5,
        "attention_dropout_rate": 0.0,
        "feedforward_dropout_rate": 0.0,
    },
}
