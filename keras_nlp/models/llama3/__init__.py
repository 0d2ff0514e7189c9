"""Llama 3 backbones."""

from keras_nlp.models.llama3.llama3_backbone import Llama3Backbone

__all__ = ["Llama3Backbone"]
