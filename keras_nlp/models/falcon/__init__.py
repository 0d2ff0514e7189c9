"""Falcon backbone."""

from keras_nlp.models.falcon.falcon_backbone import FalconBackbone

__all__ = ["FalconBackbone"]
