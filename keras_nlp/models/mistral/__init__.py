"""Mistral backbones."""

from keras_nlp.models.mistral.mistral_backbone import MistralBackbone

__all__ = ["MistralBackbone"]
