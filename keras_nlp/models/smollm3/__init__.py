"""SmolLM3 backbones."""

from keras_nlp.models.smollm3.smollm3_backbone import SmolLM3Backbone

__all__ = ["SmolLM3Backbone"]
