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

    Example:

    ```python
    import numpy as np
    import keras_nlp

    backbone = keras_nlp.models.Qwen3_5MoeBackbone(
        vocabulary_size=64, num_layers=2, num_query_heads=4,
        num_key_value_heads=2, head_dim=8, hidden_dim=16,
        moe_intermediate_dim=8, shared_expert_intermediate_size=16,
        num_experts=4, top_k=2,
        layer_types=["linear_attention", "full_attention"],
        linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=8, linear_value_head_dim=8,
    )
    causal_lm = keras_nlp.models.Qwen3_5MoeCausalLM(backbone)
    prompts = {
        "token_ids": np.array([[0, 5, 6], [7, 8, 9]], "int32"),
        "padding_mask": np.array([[0, 1, 1], [1, 1, 1]], "int32"),
    }
    causal_lm.generate(prompts, max_length=6)["token_ids"].shape  # (2, 6)
    ```
    """

    backbone_cls = Qwen3_5MoeBackbone
