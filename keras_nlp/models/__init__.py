"""All keras_nlp backbones."""

from keras_nlp.models.backbone import Backbone
from keras_nlp.models.gemma.gemma_backbone import GemmaBackbone

__all__ = ["Backbone", "GemmaBackbone"]
