"""BLOOM backbone."""

from keras_nlp.models.bloom.bloom_backbone import BloomBackbone

__all__ = ["BloomBackbone"]
