"""Built-in BART preset configs (configs only: no weights are bundled).

Facebook's BART in the keras-hub format: as many decoder blocks as encoder
blocks, 64-wide heads, a feed-forward four times the hidden width, 1024
positions and GPT-2's byte-level vocabulary of 50265 tokens (odd; 50264
in the CNN/DailyMail fine-tune).
"""

import functools

from keras_nlp.models.families.presets import preset_config

_bart = functools.partial(
    preset_config, vocabulary_size=50265, max_sequence_length=1024
)


BART_PRESETS = {
    "bart_base_en": _bart(num_layers=6, num_heads=12, hidden_dim=768),
    "bart_large_en": _bart(num_layers=12, num_heads=16, hidden_dim=1024),
    "bart_large_en_cnn": _bart(
        num_layers=12, num_heads=16, hidden_dim=1024, vocabulary_size=50264
    ),
}
