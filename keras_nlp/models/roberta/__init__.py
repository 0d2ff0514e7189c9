"""RoBERTa."""

from keras_nlp.models.roberta.roberta_backbone import RobertaBackbone

__all__ = ["RobertaBackbone"]
