"""Built-in GPT-2 preset configs (configs only: no weights are bundled).

OpenAI's four GPT-2 sizes in the keras-hub format: a 50257-token vocabulary
(odd, so it divides no mesh axis), 1024 positions, 64-wide heads and a
feed-forward four times the hidden width.
"""

import functools

from keras_nlp.models.families.presets import preset_config

_gpt2 = functools.partial(
    preset_config, vocabulary_size=50257, max_sequence_length=1024
)


GPT2_PRESETS = {
    "gpt2_base_en": _gpt2(num_layers=12, num_heads=12, hidden_dim=768),
    "gpt2_medium_en": _gpt2(num_layers=24, num_heads=16, hidden_dim=1024),
    "gpt2_large_en": _gpt2(num_layers=36, num_heads=20, hidden_dim=1280),
    "gpt2_extra_large_en": _gpt2(num_layers=48, num_heads=25, hidden_dim=1600),
}
