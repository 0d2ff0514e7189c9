"""Gemma and Gemma 2 backbones."""

from keras_nlp.models.gemma.gemma_backbone import GemmaBackbone

__all__ = ["GemmaBackbone"]
