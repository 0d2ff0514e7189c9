"""All keras_nlp backbones."""

from keras_nlp.models.backbone import Backbone
from keras_nlp.models.bert.bert_backbone import BertBackbone
from keras_nlp.models.bloom.bloom_backbone import BloomBackbone
from keras_nlp.models.falcon.falcon_backbone import FalconBackbone
from keras_nlp.models.gemma.gemma_backbone import GemmaBackbone
from keras_nlp.models.gemma3.gemma3_backbone import Gemma3Backbone
from keras_nlp.models.gpt2.gpt2_backbone import GPT2Backbone
from keras_nlp.models.gpt_neo_x.gpt_neo_x_backbone import GPTNeoXBackbone
from keras_nlp.models.llama.llama_backbone import LlamaBackbone
from keras_nlp.models.llama3.llama3_backbone import Llama3Backbone
from keras_nlp.models.mistral.mistral_backbone import MistralBackbone
from keras_nlp.models.mixtral.mixtral_backbone import MixtralBackbone
from keras_nlp.models.opt.opt_backbone import OPTBackbone
from keras_nlp.models.phi3.phi3_backbone import Phi3Backbone
from keras_nlp.models.qwen.qwen_backbone import QwenBackbone
from keras_nlp.models.qwen3.qwen3_backbone import Qwen3Backbone

__all__ = [
    "Backbone",
    "BertBackbone",
    "BloomBackbone",
    "FalconBackbone",
    "GPT2Backbone",
    "GPTNeoXBackbone",
    "Gemma3Backbone",
    "GemmaBackbone",
    "Llama3Backbone",
    "LlamaBackbone",
    "MistralBackbone",
    "MixtralBackbone",
    "OPTBackbone",
    "Phi3Backbone",
    "Qwen3Backbone",
    "QwenBackbone",
]
