"""GPT-OSS (sparse mixture-of-experts, attention sinks) backbones."""

from keras_nlp.models.gpt_oss.gpt_oss_backbone import GptOssBackbone
from keras_nlp.models.gpt_oss.yarn_rotary_embedding import YarnRotaryEmbedding

__all__ = ["GptOssBackbone", "YarnRotaryEmbedding"]
