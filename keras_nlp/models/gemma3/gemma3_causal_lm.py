"""Gemma 3's causal LM."""

import keras

from keras_nlp.models.causal_lm import PreprocessorFirstCausalLM
from keras_nlp.models.gemma3.gemma3_backbone import Gemma3Backbone


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class Gemma3CausalLM(PreprocessorFirstCausalLM):
    """A `Gemma3Backbone` and its head: next-token logits and `generate`.

    The head is the tied token embedding; prompts are text (a vision
    encoder, if any, is not run). Everything else (`fit`, `generate`,
    presets, sharding) is `keras_nlp.models.CausalLM`'s.

    Args:
        preprocessor: optional `TextPreprocessor` or `Tokenizer`, first
            as in keras-hub (or the backbone, given alone).
        backbone: a `Gemma3Backbone`.
        tokenizer: optional `keras_nlp.tokenizers.Tokenizer` (keyword
            only).
        **kwargs: forwarded to `keras.Model`.

    Example:

    ```python
    import keras_nlp

    # From a preset directory (ours, keras-hub's or a Hugging Face
    # checkpoint, with its tokenizer):
    # causal_lm = keras_nlp.models.Gemma3CausalLM.from_preset("./model_dir")
    # causal_lm.generate("The capital of France is", max_new_tokens=8)
    backbone = keras_nlp.models.Gemma3Backbone(
        vocabulary_size=96, num_layers=2, hidden_dim=32, num_query_heads=4,
        num_key_value_heads=2, image_size=16, intermediate_dim=64,
        head_dim=8,
    )
    causal_lm = keras_nlp.models.Gemma3CausalLM(backbone)
    causal_lm.generate([[1, 2, 3]], max_new_tokens=4)["token_ids"]
    ```
    """

    backbone_cls = Gemma3Backbone
