"""ELECTRA."""

from keras_nlp.models.electra.electra_backbone import ElectraBackbone

__all__ = ["ElectraBackbone"]
