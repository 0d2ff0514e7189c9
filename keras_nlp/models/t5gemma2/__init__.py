"""T5Gemma 2 encoder-decoder backbones (text)."""

from keras_nlp.models.t5gemma2.t5gemma2_backbone import T5Gemma2Backbone

__all__ = ["T5Gemma2Backbone"]
