"""Llama 4 (text) backbones."""

from keras_nlp.models.llama4.llama4_backbone import Llama4Backbone

__all__ = ["Llama4Backbone"]
