"""All keras_nlp backbones."""

from keras_nlp.models.albert.albert_backbone import AlbertBackbone
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.bart.bart_backbone import BartBackbone
from keras_nlp.models.bert.bert_backbone import BertBackbone
from keras_nlp.models.bloom.bloom_backbone import BloomBackbone
from keras_nlp.models.causal_lm import CausalLM
from keras_nlp.models.deberta_v3.deberta_v3_backbone import DebertaV3Backbone
from keras_nlp.models.deepseek_v3.deepseek_v3_backbone import DeepSeekV3Backbone
from keras_nlp.models.distil_bert.distil_bert_backbone import DistilBertBackbone
from keras_nlp.models.electra.electra_backbone import ElectraBackbone
from keras_nlp.models.f_net.f_net_backbone import FNetBackbone
from keras_nlp.models.falcon.falcon_backbone import FalconBackbone
from keras_nlp.models.family_causal_lms import BloomCausalLM
from keras_nlp.models.family_causal_lms import DeepSeekV3CausalLM
from keras_nlp.models.family_causal_lms import FalconCausalLM
from keras_nlp.models.family_causal_lms import Gemma3CausalLM
from keras_nlp.models.family_causal_lms import GemmaCausalLM
from keras_nlp.models.family_causal_lms import GPT2CausalLM
from keras_nlp.models.family_causal_lms import GPTNeoXCausalLM
from keras_nlp.models.family_causal_lms import GptOssCausalLM
from keras_nlp.models.family_causal_lms import Llama3CausalLM
from keras_nlp.models.family_causal_lms import Llama4CausalLM
from keras_nlp.models.family_causal_lms import LlamaCausalLM
from keras_nlp.models.family_causal_lms import MistralCausalLM
from keras_nlp.models.family_causal_lms import MixtralCausalLM
from keras_nlp.models.family_causal_lms import OPTCausalLM
from keras_nlp.models.family_causal_lms import Phi3CausalLM
from keras_nlp.models.family_causal_lms import Qwen3CausalLM
from keras_nlp.models.family_causal_lms import Qwen3MoeCausalLM
from keras_nlp.models.family_causal_lms import QwenCausalLM
from keras_nlp.models.family_causal_lms import QwenMoeCausalLM
from keras_nlp.models.family_causal_lms import SmolLM3CausalLM
from keras_nlp.models.family_masked_lms import AlbertMaskedLM
from keras_nlp.models.family_masked_lms import BertMaskedLM
from keras_nlp.models.family_masked_lms import DebertaV3MaskedLM
from keras_nlp.models.family_masked_lms import DistilBertMaskedLM
from keras_nlp.models.family_masked_lms import FNetMaskedLM
from keras_nlp.models.family_masked_lms import RobertaMaskedLM
from keras_nlp.models.family_masked_lms import XLMRobertaMaskedLM
from keras_nlp.models.family_seq2seq_lms import BartSeq2SeqLM
from keras_nlp.models.family_seq2seq_lms import T5Gemma2Seq2SeqLM
from keras_nlp.models.family_seq2seq_lms import T5GemmaSeq2SeqLM
from keras_nlp.models.family_seq2seq_lms import T5Seq2SeqLM
from keras_nlp.models.family_seq2seq_lms import WhisperAudioToText
from keras_nlp.models.family_text_classifiers import AlbertClassifier
from keras_nlp.models.family_text_classifiers import AlbertTextClassifier
from keras_nlp.models.family_text_classifiers import BertClassifier
from keras_nlp.models.family_text_classifiers import BertTextClassifier
from keras_nlp.models.family_text_classifiers import DebertaV3Classifier
from keras_nlp.models.family_text_classifiers import DebertaV3TextClassifier
from keras_nlp.models.family_text_classifiers import DistilBertClassifier
from keras_nlp.models.family_text_classifiers import DistilBertTextClassifier
from keras_nlp.models.family_text_classifiers import ElectraTextClassifier
from keras_nlp.models.family_text_classifiers import FNetClassifier
from keras_nlp.models.family_text_classifiers import FNetTextClassifier
from keras_nlp.models.family_text_classifiers import RobertaClassifier
from keras_nlp.models.family_text_classifiers import RobertaTextClassifier
from keras_nlp.models.family_text_classifiers import XLMRobertaClassifier
from keras_nlp.models.family_text_classifiers import XLMRobertaTextClassifier
from keras_nlp.models.family_text_classifiers import XLNetTextClassifier
from keras_nlp.models.gemma.gemma_backbone import GemmaBackbone
from keras_nlp.models.gemma3.gemma3_backbone import Gemma3Backbone
from keras_nlp.models.gemma3.gemma3_vision_encoder import Gemma3VisionEncoder
from keras_nlp.models.gemma4.gemma4_backbone import Gemma4Backbone
from keras_nlp.models.gemma4.gemma4_causal_lm import Gemma4CausalLM
from keras_nlp.models.gpt2.gpt2_backbone import GPT2Backbone
from keras_nlp.models.gpt_neo_x.gpt_neo_x_backbone import GPTNeoXBackbone
from keras_nlp.models.gpt_oss.gpt_oss_backbone import GptOssBackbone
from keras_nlp.models.llama.llama_backbone import LlamaBackbone
from keras_nlp.models.llama3.llama3_backbone import Llama3Backbone
from keras_nlp.models.llama4.llama4_backbone import Llama4Backbone
from keras_nlp.models.masked_lm import MaskedLM
from keras_nlp.models.mistral.mistral_backbone import MistralBackbone
from keras_nlp.models.mixtral.mixtral_backbone import MixtralBackbone
from keras_nlp.models.opt.opt_backbone import OPTBackbone
from keras_nlp.models.pali_gemma.pali_gemma_backbone import PaliGemmaBackbone
from keras_nlp.models.pali_gemma.pali_gemma_causal_lm import PaliGemmaCausalLM
from keras_nlp.models.phi3.phi3_backbone import Phi3Backbone
from keras_nlp.models.qwen.qwen_backbone import QwenBackbone
from keras_nlp.models.qwen3.qwen3_backbone import Qwen3Backbone
from keras_nlp.models.qwen3_5.qwen3_5_backbone import Qwen3_5Backbone
from keras_nlp.models.qwen3_5.qwen3_5_causal_lm import Qwen3_5CausalLM
from keras_nlp.models.qwen3_5_moe.qwen3_5_moe_backbone import Qwen3_5MoeBackbone
from keras_nlp.models.qwen3_5_moe.qwen3_5_moe_causal_lm import (
    Qwen3_5MoeCausalLM,
)
from keras_nlp.models.qwen3_moe.qwen3_moe_backbone import Qwen3MoeBackbone
from keras_nlp.models.qwen_moe.qwen_moe_backbone import QwenMoeBackbone
from keras_nlp.models.roberta.roberta_backbone import RobertaBackbone
from keras_nlp.models.seq2seq_lm import Seq2SeqLM
from keras_nlp.models.smollm3.smollm3_backbone import SmolLM3Backbone
from keras_nlp.models.t5.t5_backbone import T5Backbone
from keras_nlp.models.t5gemma.t5gemma_backbone import T5GemmaBackbone
from keras_nlp.models.t5gemma2.t5gemma2_backbone import T5Gemma2Backbone
from keras_nlp.models.text_classifier import TextClassifier
from keras_nlp.models.whisper.whisper_backbone import WhisperBackbone
from keras_nlp.models.xlm_roberta.xlm_roberta_backbone import XLMRobertaBackbone
from keras_nlp.models.xlnet.xlnet_backbone import XLNetBackbone

__all__ = [
    "AlbertBackbone",
    "Backbone",
    "BartBackbone",
    "BartSeq2SeqLM",
    "BertBackbone",
    "BloomBackbone",
    "BloomCausalLM",
    "CausalLM",
    "DebertaV3Backbone",
    "DeepSeekV3Backbone",
    "DeepSeekV3CausalLM",
    "DistilBertBackbone",
    "ElectraBackbone",
    "FNetBackbone",
    "FalconBackbone",
    "FalconCausalLM",
    "GPT2Backbone",
    "GPT2CausalLM",
    "GPTNeoXBackbone",
    "GPTNeoXCausalLM",
    "Gemma3Backbone",
    "Gemma3CausalLM",
    "Gemma3VisionEncoder",
    "Gemma4Backbone",
    "Gemma4CausalLM",
    "GemmaBackbone",
    "GemmaCausalLM",
    "GptOssBackbone",
    "GptOssCausalLM",
    "Llama3Backbone",
    "Llama3CausalLM",
    "Llama4Backbone",
    "Llama4CausalLM",
    "LlamaBackbone",
    "LlamaCausalLM",
    "MistralBackbone",
    "MistralCausalLM",
    "MixtralBackbone",
    "MixtralCausalLM",
    "OPTBackbone",
    "OPTCausalLM",
    "PaliGemmaBackbone",
    "PaliGemmaCausalLM",
    "Phi3Backbone",
    "Phi3CausalLM",
    "Qwen3Backbone",
    "Qwen3CausalLM",
    "Qwen3_5Backbone",
    "Qwen3_5CausalLM",
    "Qwen3_5MoeBackbone",
    "Qwen3_5MoeCausalLM",
    "Qwen3MoeBackbone",
    "Qwen3MoeCausalLM",
    "QwenBackbone",
    "QwenCausalLM",
    "QwenMoeBackbone",
    "QwenMoeCausalLM",
    "RobertaBackbone",
    "Seq2SeqLM",
    "SmolLM3Backbone",
    "SmolLM3CausalLM",
    "T5Backbone",
    "T5Gemma2Backbone",
    "T5Gemma2Seq2SeqLM",
    "T5GemmaBackbone",
    "T5GemmaSeq2SeqLM",
    "T5Seq2SeqLM",
    "WhisperAudioToText",
    "WhisperBackbone",
    "XLMRobertaBackbone",
    "XLNetBackbone",
    "AlbertClassifier",
    "AlbertTextClassifier",
    "BertClassifier",
    "BertTextClassifier",
    "DebertaV3Classifier",
    "DebertaV3TextClassifier",
    "DistilBertClassifier",
    "DistilBertTextClassifier",
    "ElectraTextClassifier",
    "FNetClassifier",
    "FNetTextClassifier",
    "RobertaClassifier",
    "RobertaTextClassifier",
    "XLMRobertaClassifier",
    "XLMRobertaTextClassifier",
    "XLNetTextClassifier",
    "TextClassifier",
    "AlbertMaskedLM",
    "BertMaskedLM",
    "DebertaV3MaskedLM",
    "DistilBertMaskedLM",
    "FNetMaskedLM",
    "RobertaMaskedLM",
    "XLMRobertaMaskedLM",
    "MaskedLM",
]


def _register_huggingface_families():
    """Imports each `<model>/*_huggingface.py`: the families register."""
    import importlib
    import pkgutil

    for package in pkgutil.iter_modules(__path__):
        if not package.ispkg:
            continue
        module = importlib.import_module(f"{__name__}.{package.name}")
        for sub in pkgutil.iter_modules(module.__path__):
            if sub.name.endswith("_huggingface"):
                importlib.import_module(f"{module.__name__}.{sub.name}")


_register_huggingface_families()
