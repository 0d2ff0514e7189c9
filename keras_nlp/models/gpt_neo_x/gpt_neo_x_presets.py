"""Built-in GPT-NeoX preset configs (configs only: no weights are bundled).

keras-hub ships no GPT-NeoX preset; these are EleutherAI's Pythia models in
the keras-hub checkpoint format (vocabulary padded to 50304, a quarter of
each head rotated, parallel attention and feed-forward residuals).
"""

_PYTHIA = {
    "vocabulary_size": 50304,
    "num_layers": 24,
    "num_heads": 16,
    "rotary_percentage": 0.25,
    "rotary_max_wavelength": 10000,
    "layer_norm_epsilon": 1e-5,
    "max_sequence_length": 2048,
}

GPT_NEO_X_PRESETS = {
    "pythia_410m_en": {
        **_PYTHIA,
        "hidden_dim": 1024,
        "intermediate_dim": 4096,
    },
    "pythia_1.4b_en": {
        **_PYTHIA,
        "hidden_dim": 2048,
        "intermediate_dim": 8192,
    },
}
