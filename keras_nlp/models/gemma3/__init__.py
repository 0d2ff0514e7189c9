"""Gemma 3 backbone and its vision encoder."""

from keras_nlp.models.gemma3.gemma3_backbone import Gemma3Backbone
from keras_nlp.models.gemma3.gemma3_vision_encoder import Gemma3VisionEncoder

__all__ = ["Gemma3Backbone", "Gemma3VisionEncoder"]
