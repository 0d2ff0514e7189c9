"""Built-in Whisper preset configs (configs only: no weights are bundled).

OpenAI's Whisper sizes in the keras-hub format: 80 mel bins, 3000 input
frames (1500 after the strided convolution), 448 decoder positions,
64-wide heads and a feed-forward four times the hidden width. English-only
checkpoints have 51864 tokens (8 x 6483), multilingual ones 51865 (odd).
"""

import functools

from keras_nlp.models.families.presets import preset_config

ENGLISH_VOCABULARY = 51864
MULTILINGUAL_VOCABULARY = 51865


_whisper = functools.partial(
    preset_config,
    dropout=0.0,
    num_mels=80,
    max_encoder_sequence_length=3000,
    max_decoder_sequence_length=448,
)


# name -> (num_layers, num_heads, hidden_dim).
_SIZES = {
    "tiny": (4, 6, 384),
    "base": (6, 8, 512),
    "small": (12, 12, 768),
    "medium": (24, 16, 1024),
    "large": (32, 20, 1280),
}

WHISPER_PRESETS = {
    **{
        f"whisper_{size}_en": _whisper(
            *_SIZES[size], vocabulary_size=ENGLISH_VOCABULARY
        )
        for size in ("tiny", "base", "small", "medium")
    },
    **{
        f"whisper_{size}_multi": _whisper(
            *_SIZES[size], vocabulary_size=MULTILINGUAL_VOCABULARY
        )
        for size in ("tiny", "base", "small", "medium", "large")
    },
    # large-v2: more training, the same architecture.
    "whisper_large_multi_v2": _whisper(
        *_SIZES["large"], vocabulary_size=MULTILINGUAL_VOCABULARY
    ),
}
