"""Qwen MoE's causal LM."""

import keras

from keras_nlp.models.causal_lm import CausalLM
from keras_nlp.models.qwen_moe.qwen_moe_backbone import QwenMoeBackbone


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class QwenMoeCausalLM(CausalLM):
    """A `QwenMoeBackbone` and its head: next-token logits and `generate`.

    The head is the untied output embedding, or the tied table. Everything
    else (`fit`, `generate`, presets, sharding) is
    `keras_nlp.models.CausalLM`'s.

    Args:
        backbone: a `QwenMoeBackbone`.
        preprocessor: optional `TextPreprocessor` or `Tokenizer` (see
            `CausalLM`).
        tokenizer: optional `Tokenizer` (keyword only).
        **kwargs: forwarded to `keras.Model`.

    Example:

    ```python
    import keras_nlp

    # From a preset directory (ours, keras-hub's or a Hugging Face
    # checkpoint, with its tokenizer):
    # causal_lm = keras_nlp.models.QwenMoeCausalLM.from_preset("./model_dir")
    # causal_lm.generate("The capital of France is", max_new_tokens=8)
    backbone = keras_nlp.models.QwenMoeBackbone(
        vocabulary_size=96, num_layers=2, hidden_dim=32, num_query_heads=4,
        num_key_value_heads=2, intermediate_dim=48,
        moe_intermediate_dim=16, shared_expert_intermediate_dim=24,
        num_experts=4, top_k=2,
    )
    causal_lm = keras_nlp.models.QwenMoeCausalLM(backbone)
    causal_lm.generate([[1, 2, 3]], max_new_tokens=4)["token_ids"]
    ```
    """

    backbone_cls = QwenMoeBackbone
