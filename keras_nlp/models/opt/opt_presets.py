"""Built-in OPT preset configs (configs only: no weights are bundled).

Meta's OPT models in the keras-hub format: a 50272-token vocabulary, 2048
positions and a feed-forward four times the hidden width.
"""

import functools

from keras_nlp.models.families.presets import preset_config

_opt = functools.partial(
    preset_config, vocabulary_size=50272, max_sequence_length=2048
)


OPT_PRESETS = {
    "opt_125m_en": _opt(num_layers=12, num_heads=12, hidden_dim=768),
    "opt_1.3b_en": _opt(num_layers=24, num_heads=32, hidden_dim=2048),
    # head_dim 80.
    "opt_2.7b_en": _opt(num_layers=32, num_heads=32, hidden_dim=2560),
    "opt_6.7b_en": _opt(num_layers=32, num_heads=32, hidden_dim=4096),
}
