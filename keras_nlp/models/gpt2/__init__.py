"""GPT-2 backbones."""

from keras_nlp.models.gpt2.gpt2_backbone import GPT2Backbone

__all__ = ["GPT2Backbone"]
