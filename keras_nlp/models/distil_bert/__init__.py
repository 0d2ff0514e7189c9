"""DistilBERT."""

from keras_nlp.models.distil_bert.distil_bert_backbone import DistilBertBackbone

__all__ = ["DistilBertBackbone"]
