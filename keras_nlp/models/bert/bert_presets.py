"""Built-in BERT preset configs (configs only: no weights are bundled).

Google's English BERT sizes in the keras-hub format: a 30522-token uncased
vocabulary (28996 cased), which divides only by 2, 512 positions, two
segments, 64-wide heads and a feed-forward four times the hidden width.
"""

import functools

from keras_nlp.models.families.presets import preset_config

_bert = functools.partial(
    preset_config,
    vocabulary_size=30522,
    max_sequence_length=512,
    num_segments=2,
)


BERT_PRESETS = {
    "bert_tiny_en_uncased": _bert(num_layers=2, num_heads=2, hidden_dim=128),
    "bert_small_en_uncased": _bert(num_layers=4, num_heads=8, hidden_dim=512),
    "bert_medium_en_uncased": _bert(num_layers=8, num_heads=8, hidden_dim=512),
    "bert_base_en_uncased": _bert(num_layers=12, num_heads=12, hidden_dim=768),
    "bert_base_en": _bert(
        num_layers=12, num_heads=12, hidden_dim=768, vocabulary_size=28996
    ),
    "bert_large_en_uncased": _bert(
        num_layers=24, num_heads=16, hidden_dim=1024
    ),
}
