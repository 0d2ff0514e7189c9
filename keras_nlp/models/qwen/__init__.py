"""Qwen 2 and Qwen 2.5 backbones."""

from keras_nlp.models.qwen.qwen_backbone import QwenBackbone

__all__ = ["QwenBackbone"]
