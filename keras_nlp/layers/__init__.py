"""Reusable layers shared by keras_nlp backbones."""

from keras_nlp.layers.grouped_query_attention import grouped_query_attention
from keras_nlp.layers.rotary_embedding import RotaryEmbedding
from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)

__all__ = [
    "RotaryEmbedding",
    "ZeroCenteredRMSNormalization",
    "grouped_query_attention",
]
