"""BERT."""

from keras_nlp.models.bert.bert_backbone import BertBackbone

__all__ = ["BertBackbone"]
