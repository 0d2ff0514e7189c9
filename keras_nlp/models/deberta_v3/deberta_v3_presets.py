"""Built-in DeBERTaV3 preset configs (configs only: no weights are bundled).

Microsoft's DeBERTaV3 sizes in the keras-hub format: a 128100-token
English vocabulary (4 x 32025, so no 8-way axis divides it) or the
251000-token multilingual one, 64-wide heads, a feed-forward four times
the hidden width, 512 positions and 256 relative-position buckets.
"""

import functools

from keras_nlp.models.families.presets import preset_config

_deberta_v3 = functools.partial(
    preset_config,
    vocabulary_size=128100,
    max_sequence_length=512,
    bucket_size=256,
)


DEBERTA_V3_PRESETS = {
    "deberta_v3_extra_small_en": _deberta_v3(
        num_layers=12, num_heads=6, hidden_dim=384
    ),
    "deberta_v3_small_en": _deberta_v3(
        num_layers=6, num_heads=12, hidden_dim=768
    ),
    "deberta_v3_base_en": _deberta_v3(
        num_layers=12, num_heads=12, hidden_dim=768
    ),
    "deberta_v3_large_en": _deberta_v3(
        num_layers=24, num_heads=16, hidden_dim=1024
    ),
    "deberta_v3_base_multi": _deberta_v3(
        num_layers=12, num_heads=12, hidden_dim=768, vocabulary_size=251000
    ),
}
