"""Gemma 4 (text)."""

from keras_nlp.models.gemma4.gemma4_backbone import Gemma4Backbone

__all__ = ["Gemma4Backbone"]
