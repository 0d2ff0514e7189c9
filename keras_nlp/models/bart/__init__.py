"""BART."""

from keras_nlp.models.bart.bart_backbone import BartBackbone

__all__ = ["BartBackbone"]
