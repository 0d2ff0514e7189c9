"""Built-in XLNet preset configs: none.

keras-hub 0.32.0 ships no XLNet preset, so neither does keras_nlp. The
base-sized architecture (`vocabulary_size=32000, num_layers=12,
num_heads=12, hidden_dim=768, intermediate_dim=3072`) is checked as a
config in `tests/models/xlnet/test_xlnet_layout.py`.
"""

XLNET_PRESETS = {}
