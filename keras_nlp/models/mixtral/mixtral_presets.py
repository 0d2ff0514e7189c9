"""Built-in Mixtral preset configs (configs only: no weights are bundled)."""

MIXTRAL_PRESETS = {
    # Mixtral 8x7B v0.1: 8 experts, 2 per token, full attention.
    "mixtral_8_7b_en": {
        "vocabulary_size": 32000,
        "num_layers": 32,
        "num_query_heads": 32,
        "num_key_value_heads": 8,
        "hidden_dim": 4096,
        "intermediate_dim": 14336,
        "num_experts": 8,
        "top_k": 2,
        "rope_max_wavelength": 1000000,
        "layer_norm_epsilon": 1e-5,
        "router_aux_loss_coef": 0.02,
        "sliding_window": None,
    },
}
