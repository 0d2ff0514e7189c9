"""Phi-3 backbones."""

from keras_nlp.models.phi3.phi3_backbone import Phi3Backbone
from keras_nlp.models.phi3.phi3_rotary_embedding import (
    Phi3SuScaledRotaryEmbedding,
)

__all__ = ["Phi3Backbone", "Phi3SuScaledRotaryEmbedding"]
