"""Built-in RoBERTa preset configs (configs only: no weights are bundled).

Facebook's English RoBERTa sizes in the keras-hub format: a 50265-token
byte-level BPE vocabulary, which is odd (no model axis divides it), 512
positions, no segments, 64-wide heads and a feed-forward four times the
hidden width.
"""

import functools

from keras_nlp.models.families.presets import preset_config

_roberta = functools.partial(
    preset_config, vocabulary_size=50265, max_sequence_length=512
)


ROBERTA_PRESETS = {
    "roberta_base_en": _roberta(num_layers=12, num_heads=12, hidden_dim=768),
    "roberta_large_en": _roberta(num_layers=24, num_heads=16, hidden_dim=1024),
}
