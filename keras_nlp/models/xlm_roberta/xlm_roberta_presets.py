"""Built-in XLM-RoBERTa preset configs (configs only: no weights bundled).

RoBERTa's base and large sizes with a 250002-token multilingual
SentencePiece vocabulary, which divides only by 2: on a 4- or 8-way model
axis the token table shards its hidden dimension instead.
"""

import functools

from keras_nlp.models.families.presets import preset_config

_xlm_roberta = functools.partial(
    preset_config, vocabulary_size=250002, max_sequence_length=512
)


XLM_ROBERTA_PRESETS = {
    "xlm_roberta_base_multi": _xlm_roberta(
        num_layers=12, num_heads=12, hidden_dim=768
    ),
    "xlm_roberta_large_multi": _xlm_roberta(
        num_layers=24, num_heads=16, hidden_dim=1024
    ),
}
