"""Qwen 3.5 MoE backbones."""

from keras_nlp.models.qwen3_5_moe.qwen3_5_moe_backbone import Qwen3_5MoeBackbone

__all__ = ["Qwen3_5MoeBackbone"]
