"""DeBERTaV3."""

from keras_nlp.models.deberta_v3.deberta_v3_backbone import DebertaV3Backbone

__all__ = ["DebertaV3Backbone"]
