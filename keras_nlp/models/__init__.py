"""All keras_nlp backbones."""

from keras_nlp.models.backbone import Backbone
from keras_nlp.models.gemma.gemma_backbone import GemmaBackbone
from keras_nlp.models.llama.llama_backbone import LlamaBackbone
from keras_nlp.models.llama3.llama3_backbone import Llama3Backbone

__all__ = ["Backbone", "GemmaBackbone", "Llama3Backbone", "LlamaBackbone"]
