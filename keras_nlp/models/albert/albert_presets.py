"""Built-in ALBERT preset configs (configs only: no weights are bundled).

Google's English ALBERT v2 sizes in the keras-hub format: a 30000-token
uncased SentencePiece vocabulary (16 x 1875), 128-wide embeddings projected
up to the hidden width, one group of one block shared by every layer,
64-wide heads, a feed-forward four times the hidden width, no dropout.
"""

import functools

from keras_nlp.models.families.presets import preset_config

_albert = functools.partial(
    preset_config,
    vocabulary_size=30000,
    dropout=0.0,
    embedding_dim=128,
    num_groups=1,
    num_inner_repetitions=1,
    max_sequence_length=512,
    num_segments=2,
)


ALBERT_PRESETS = {
    "albert_base_en_uncased": _albert(
        num_layers=12, num_heads=12, hidden_dim=768
    ),
    "albert_large_en_uncased": _albert(
        num_layers=24, num_heads=16, hidden_dim=1024
    ),
    "albert_extra_large_en_uncased": _albert(
        num_layers=24, num_heads=16, hidden_dim=2048
    ),
    "albert_extra_extra_large_en_uncased": _albert(
        num_layers=12, num_heads=64, hidden_dim=4096
    ),
}
