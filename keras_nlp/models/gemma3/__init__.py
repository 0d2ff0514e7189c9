"""Gemma 3 backbone (text only)."""

from keras_nlp.models.gemma3.gemma3_backbone import Gemma3Backbone

__all__ = ["Gemma3Backbone"]
