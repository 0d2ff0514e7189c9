"""ALBERT."""

from keras_nlp.models.albert.albert_backbone import AlbertBackbone

__all__ = ["AlbertBackbone"]
