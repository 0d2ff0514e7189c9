"""Gemma and Gemma 2's causal LM."""

import keras

from keras_nlp.models.causal_lm import CausalLM
from keras_nlp.models.gemma.gemma_backbone import GemmaBackbone


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class GemmaCausalLM(CausalLM):
    """A `GemmaBackbone` and its head: next-token logits and `generate`.

    The head is the tied token embedding, with Gemma 2's final logit soft
    cap. Everything else (`fit`, `generate`, presets, sharding) is
    `keras_nlp.models.CausalLM`'s.

    Args:
        backbone: a `GemmaBackbone`.
        preprocessor: optional `TextPreprocessor` or `Tokenizer` (see
            `CausalLM`).
        tokenizer: optional `Tokenizer` (keyword only).
        **kwargs: forwarded to `keras.Model`.

    Example:

    ```python
    import keras_nlp

    # From a preset directory (ours, keras-hub's or a Hugging Face
    # checkpoint, with its tokenizer):
    # causal_lm = keras_nlp.models.GemmaCausalLM.from_preset("./model_dir")
    # causal_lm.generate("The capital of France is", max_new_tokens=8)
    backbone = keras_nlp.models.GemmaBackbone(
        vocabulary_size=96, num_layers=2, hidden_dim=32, num_query_heads=4,
        num_key_value_heads=1, intermediate_dim=64, head_dim=8,
    )
    causal_lm = keras_nlp.models.GemmaCausalLM(backbone)
    causal_lm.generate([[1, 2, 3]], max_new_tokens=4)["token_ids"]
    ```
    """

    backbone_cls = GemmaBackbone
