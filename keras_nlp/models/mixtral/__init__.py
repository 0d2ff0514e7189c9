"""Mixtral (sparse mixture-of-experts) backbones."""

from keras_nlp.models.mixtral.mixtral_backbone import MixtralBackbone

__all__ = ["MixtralBackbone"]
