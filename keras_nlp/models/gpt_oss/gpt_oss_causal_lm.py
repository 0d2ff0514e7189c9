"""GPT-OSS's causal LM."""

import keras

from keras_nlp.models.causal_lm import CausalLM
from keras_nlp.models.gpt_oss.gpt_oss_backbone import GptOssBackbone


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class GptOssCausalLM(CausalLM):
    """A `GptOssBackbone` and its head: next-token logits and `generate`.

    The head is the untied output embedding. Everything else (`fit`,
    `generate`, presets, sharding) is `keras_nlp.models.CausalLM`'s.

    Args:
        backbone: a `GptOssBackbone`.
        preprocessor: optional `TextPreprocessor` or `Tokenizer` (see
            `CausalLM`).
        tokenizer: optional `Tokenizer` (keyword only).
        **kwargs: forwarded to `keras.Model`.

    Example:

    ```python
    import keras_nlp

    # From a preset directory (ours, keras-hub's or a Hugging Face
    # checkpoint, with its tokenizer):
    # causal_lm = keras_nlp.models.GptOssCausalLM.from_preset("./model_dir")
    # causal_lm.generate("The capital of France is", max_new_tokens=8)
    backbone = keras_nlp.models.GptOssBackbone(
        vocabulary_size=96, num_layers=2, hidden_dim=32, num_query_heads=4,
        num_key_value_heads=2, intermediate_dim=16, num_experts=4, top_k=2,
        sliding_window=4,
    )
    causal_lm = keras_nlp.models.GptOssCausalLM(backbone)
    causal_lm.generate([[1, 2, 3]], max_new_tokens=4)["token_ids"]
    ```
    """

    backbone_cls = GptOssBackbone
