"""T5 and Flan-T5."""

from keras_nlp.models.t5.t5_backbone import T5Backbone

__all__ = ["T5Backbone"]
