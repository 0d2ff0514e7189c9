"""The sequence-to-sequence LM of each encoder-decoder family.

Each class names its backbone and, where they differ, its head and its
encoder's inputs (Whisper's audio features); `fit`,
`generate` and sharding are `Seq2SeqLM`'s, the cached decoding steps the
backbone's (`encode`, `decode_with_cache`).
"""

import keras
import numpy as np
from keras import ops

from keras_nlp.models.bart.bart_backbone import BartBackbone
from keras_nlp.models.seq2seq_lm import Seq2SeqLM
from keras_nlp.models.t5.t5_backbone import T5Backbone
from keras_nlp.models.whisper.whisper_backbone import WhisperBackbone


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
    # keras-hub's and Hugging Face's `decoder_start_token_id`: `</s>`.
    decoder_start_token = "eos"


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


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class WhisperAudioToText(Seq2SeqLM):
    """A `WhisperBackbone` and its head: speech features in, tokens out.

    The head is the decoder's token embedding reversed (Whisper ties
    them). Calling the model on `{"encoder_features", "decoder_token_ids",
    "decoder_padding_mask"}` returns logits `(batch, decoder_length,
    vocab)`; `generate` takes the same dict, the decoder prompt (e.g.
    Whisper's start-of-transcript tokens) right-padded, and returns token
    ids. The features are log-mel frames `(batch, frames, num_mels)`, as
    `keras_nlp.models.whisper.log_mel_spectrogram` makes them.

    Args:
        backbone: a `WhisperBackbone`.
        preprocessor: optional `Tokenizer` (see `Seq2SeqLM`).
        **kwargs: forwarded to `keras.Model`.

    Example:

    ```python
    import numpy as np
    import keras_nlp

    backbone = keras_nlp.models.WhisperBackbone(
        vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, num_mels=8, max_encoder_sequence_length=20,
        max_decoder_sequence_length=8,
    )
    audio_to_text = keras_nlp.models.WhisperAudioToText(backbone)
    outputs = audio_to_text.generate(
        {
            "encoder_features": np.zeros((1, 20, 8), "float32"),
            "decoder_token_ids": np.array([[50, 51, 0, 0, 0]], "int32"),
            "decoder_padding_mask": np.array([[1, 1, 0, 0, 0]], "int32"),
        },
        stop_token_ids=None,
    )
    outputs["decoder_token_ids"].shape  # (1, 5)
    ```
    """

    backbone_cls = WhisperBackbone
    encoder_input_names = ("encoder_features",)

    def _encoder_arrays(self, inputs):
        features = np.asarray(inputs["encoder_features"])
        num_mels = self.backbone.num_mels
        if features.ndim != 3 or features.shape[-1] != num_mels:
            raise ValueError(
                "`encoder_features` must be log-mel frames `(batch, frames, "
                f"num_mels={num_mels})`. Received shape: {features.shape}."
            )
        return {"encoder_features": features.astype("float32")}

    def _length_limits(self):
        backbone = self.backbone
        return {
            "encoder_features": (
                "max_encoder_sequence_length",
                backbone.max_encoder_sequence_length,
            ),
            "decoder_token_ids": (
                "max_decoder_sequence_length",
                backbone.max_decoder_sequence_length,
            ),
        }

    def _encode(self, encoder_inputs):
        # Every frame is real: no padding mask.
        return self.backbone.encode(encoder_inputs["encoder_features"]), None
