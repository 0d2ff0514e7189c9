"""Qwen 1.5 MoE backbones."""

from keras_nlp.models.qwen_moe.qwen_moe_backbone import QwenMoeBackbone

__all__ = ["QwenMoeBackbone"]
