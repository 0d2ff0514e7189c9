"""Qwen 3 MoE backbones."""

from keras_nlp.models.qwen3_moe.qwen3_moe_backbone import Qwen3MoeBackbone

__all__ = ["Qwen3MoeBackbone"]
