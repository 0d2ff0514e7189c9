"""Qwen 3 backbones."""

from keras_nlp.models.qwen3.qwen3_backbone import Qwen3Backbone

__all__ = ["Qwen3Backbone"]
