"""Qwen 3.5 MoE's causal LM."""

import keras

from keras_nlp.models.qwen3_5.qwen3_5_causal_lm import Qwen3_5CausalLMBase
from keras_nlp.models.qwen3_5_moe.qwen3_5_moe_backbone import Qwen3_5MoeBackbone


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class Qwen3_5MoeCausalLM(Qwen3_5CausalLMBase):
    """A `Qwen3_5MoeBackbone` and its head: next-token logits and
    `generate`.

    As `Qwen3_5CausalLM` (the head is the token embedding reversed; key/value
    caches for the full attention blocks, fixed-size recurrent states for
    the linear ones), over the mixture-of-experts backbone.

    Args:
        backbone: a `Qwen3_5MoeBackbone`.
        preprocessor: optional `TextPreprocessor` or `Tokenizer`.
        **kwargs: forwarded to `CausalLM`.
    """

    backbone_cls = Qwen3_5MoeBackbone
