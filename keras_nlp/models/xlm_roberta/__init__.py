"""XLM-RoBERTa."""

from keras_nlp.models.xlm_roberta.xlm_roberta_backbone import XLMRobertaBackbone

__all__ = ["XLMRobertaBackbone"]
