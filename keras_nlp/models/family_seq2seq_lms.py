"""The sequence-to-sequence LM of each encoder-decoder family.

Each class names its backbone and, where it differs, its head; `fit`,
`generate` and sharding are `Seq2SeqLM`'s, the cached decoding steps the
backbone's (`encode`, `decode_with_cache`).
"""

import keras
from keras import ops

from keras_nlp.models.bart.bart_backbone import BartBackbone
from keras_nlp.models.seq2seq_lm import Seq2SeqLM
from keras_nlp.models.t5.t5_backbone import T5Backbone


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class BartSeq2SeqLM(Seq2SeqLM):
    """A `BartBackbone` and its head: the shared token embedding reversed.

    Args:
        backbone: a `BartBackbone`.
        preprocessor: optional `Tokenizer` (see `Seq2SeqLM`).
        **kwargs: forwarded to `keras.Model`.

    Example:

    ```python
    import numpy as np
    import keras_nlp

    backbone = keras_nlp.models.BartBackbone(
        vocabulary_size=64, num_layers=2, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=16,
    )
    seq2seq_lm = keras_nlp.models.BartSeq2SeqLM(backbone)
    outputs = seq2seq_lm.generate(
        {
            "encoder_token_ids": np.array([[0, 5, 6, 2]], "int32"),
            "encoder_padding_mask": np.array([[1, 1, 1, 1]], "int32"),
            "decoder_token_ids": np.array([[2, 0, 0, 0, 0]], "int32"),
            "decoder_padding_mask": np.array([[1, 0, 0, 0, 0]], "int32"),
        },
        stop_token_ids=None,
    )
    outputs["decoder_token_ids"].shape  # (1, 5)
    ```
    """

    backbone_cls = BartBackbone


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class T5Seq2SeqLM(Seq2SeqLM):
    """A `T5Backbone` and its head: the untied output projection, or the
    tied token embedding reversed after scaling the hidden states by
    `hidden_dim ** -0.5` (as T5's checkpoints were trained).

    Args:
        backbone: a `T5Backbone`.
        preprocessor: optional `Tokenizer` (see `Seq2SeqLM`).
        **kwargs: forwarded to `keras.Model`.

    Example:

    ```python
    import numpy as np
    import keras_nlp

    backbone = keras_nlp.models.T5Backbone(
        vocabulary_size=64, num_layers=2, num_heads=2, hidden_dim=16,
        intermediate_dim=32,
    )
    seq2seq_lm = keras_nlp.models.T5Seq2SeqLM(backbone)
    outputs = seq2seq_lm.generate(
        {
            "encoder_token_ids": np.array([[5, 6, 1]], "int32"),
            "decoder_token_ids": np.array([[0, 0, 0, 0]], "int32"),
            "decoder_padding_mask": np.array([[1, 0, 0, 0]], "int32"),
        },
        stop_token_ids=None,
    )
    outputs["decoder_token_ids"].shape  # (1, 4)
    ```
    """

    backbone_cls = T5Backbone

    def logits(self, hidden_states):
        if self.backbone.tie_embedding_weights:
            scale = self.backbone.hidden_dim**-0.5
            hidden_states = hidden_states * ops.cast(scale, hidden_states.dtype)
        return super().logits(hidden_states)
