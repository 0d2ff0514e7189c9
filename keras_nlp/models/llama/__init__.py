"""Llama and Llama 2 backbones."""

from keras_nlp.models.llama.llama_backbone import LlamaBackbone

__all__ = ["LlamaBackbone"]
