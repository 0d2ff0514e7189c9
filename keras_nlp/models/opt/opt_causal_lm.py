"""OPT's causal LM."""

import keras

from keras_nlp.models.causal_lm import CausalLM
from keras_nlp.models.opt.opt_backbone import OPTBackbone


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class OPTCausalLM(CausalLM):
    """A `OPTBackbone` and its head: next-token logits and `generate`.

    The head is the tied token embedding (after OPT-350M's `project_out`).
    Everything else (`fit`, `generate`, presets, sharding) is
    `keras_nlp.models.CausalLM`'s.

    Args:
        backbone: a `OPTBackbone`.
        preprocessor: optional `TextPreprocessor` or `Tokenizer` (see
            `CausalLM`).
        tokenizer: optional `Tokenizer` (keyword only).
        **kwargs: forwarded to `keras.Model`.

    Example:

    ```python
    import keras_nlp

    # From a preset directory (ours, keras-hub's or a Hugging Face
    # checkpoint, with its tokenizer):
    # causal_lm = keras_nlp.models.OPTCausalLM.from_preset("./model_dir")
    # causal_lm.generate("The capital of France is", max_new_tokens=8)
    backbone = keras_nlp.models.OPTBackbone(
        vocabulary_size=96, num_layers=2, hidden_dim=32, num_heads=4,
        intermediate_dim=64, max_sequence_length=32,
    )
    causal_lm = keras_nlp.models.OPTCausalLM(backbone)
    causal_lm.generate([[1, 2, 3]], max_new_tokens=4)["token_ids"]
    ```
    """

    backbone_cls = OPTBackbone
