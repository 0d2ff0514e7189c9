"""DeepSeek-V3 backbones."""

from keras_nlp.models.deepseek_v3.deepseek_v3_backbone import DeepSeekV3Backbone

__all__ = ["DeepSeekV3Backbone"]
