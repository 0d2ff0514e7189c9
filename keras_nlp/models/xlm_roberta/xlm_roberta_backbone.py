"""XLM-RoBERTa encoder backbone."""

from keras_nlp.models.roberta.roberta_backbone import RobertaBackbone
from keras_nlp.models.xlm_roberta.xlm_roberta_presets import XLM_ROBERTA_PRESETS


# The architecture, arguments, variable paths and layout rules are
# RoBERTa's; only the presets (a multilingual vocabulary) differ. It is a
# subclass, as in keras-hub, so an `XLMRobertaBackbone` is a
# `RobertaBackbone`; its own class name is what presets and configs record.
class XLMRobertaBackbone(RobertaBackbone):
    """XLM-RoBERTa encoder: token ids to contextual embeddings.

    The RoBERTa architecture (see `RobertaBackbone`, which documents the
    arguments) trained on text in 100 languages with a 250002-token
    vocabulary. Takes `token_ids` and `padding_mask`; returns the sequence
    output, `(batch, seq, hidden_dim)`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models import XLMRobertaBackbone

    model = XLMRobertaBackbone(
        vocabulary_size=250,
        num_layers=2,
        num_heads=4,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=16,
    )
    outputs = model(
        {
            "token_ids": np.array([[0, 17, 9, 2, 1]], "int32"),
            "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
        }
    )
    outputs.shape  # (1, 5, 32)
    ```
    """

    presets = XLM_ROBERTA_PRESETS
