"""Built-in Phi-3 preset configs (configs only: no weights are bundled).

Only the 4k-context model: the 128k model's "su" RoPE factor lists are not
in keras-hub's preset metadata, and a config without them would be wrong.
"""

PHI3_PRESETS = {
    "phi3_mini_4k_instruct_en": {
        "vocabulary_size": 32064,
        "num_layers": 32,
        "num_query_heads": 32,
        "num_key_value_heads": 32,
        "hidden_dim": 3072,
        "intermediate_dim": 8192,
        # The published Phi-3-mini-4k config: RMS eps 1e-5, a 4096-token
        # context equal to the pretraining one, plain RoPE with base 10000.
        "layer_norm_epsilon": 1e-5,
        "max_sequence_length": 4096,
        "pretraining_sequence_length": 4096,
        "rope_max_wavelength": 10000,
    },
}
