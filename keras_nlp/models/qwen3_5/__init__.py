"""Qwen 3.5 backbones."""

from keras_nlp.models.qwen3_5.qwen3_5_backbone import Qwen3_5Backbone

__all__ = ["Qwen3_5Backbone"]
