"""Built-in SmolLM3 preset configs (configs only: no weights are bundled).

The facts of the published `HuggingFaceTB/SmolLM3-3B` `config.json`, which
keras-hub's `smollm3_3b_en` converts: every fourth layer (3, 7, 11, ...)
has no rotary embedding (`no_rope_layer_interval=4`), and the output
embedding is tied. 3,075,098,624 parameters: keras-hub's metadata says
3,075,100,928, counting its RoPE frequencies (36 layers x 64), variables
there and constants here.
"""

_NUM_LAYERS = 36

SMOLLM3_PRESETS = {
    "smollm3_3b_en": {
        "vocabulary_size": 128256,
        "hidden_dim": 2048,
        "intermediate_dim": 11008,
        "num_layers": _NUM_LAYERS,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "rope_layer_enabled_list": [
            (index + 1) % 4 != 0 for index in range(_NUM_LAYERS)
        ],
        "layer_types": ["full_attention"] * _NUM_LAYERS,
        "mlp_bias": False,
        "layer_norm_epsilon": 1e-6,
        "max_position_embeddings": 65536,
        "rope_theta": 5000000.0,
        "partial_rotary_factor": 1.0,
    },
}
