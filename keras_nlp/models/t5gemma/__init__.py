"""T5Gemma encoder-decoder backbones."""

from keras_nlp.models.t5gemma.t5gemma_backbone import T5GemmaBackbone

__all__ = ["T5GemmaBackbone"]
