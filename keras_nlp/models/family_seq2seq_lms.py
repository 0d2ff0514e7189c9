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
from keras_nlp.models.t5gemma.t5gemma_backbone import T5GemmaBackbone
from keras_nlp.models.t5gemma2.t5gemma2_backbone import T5Gemma2Backbone
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


class _T5GemmaHead:
    """The T5Gemma families' head: the decoder's token table reversed,
    then soft-capped by `final_logit_softcapping` (if set); text prompts
    start the decoder with the tokenizer's beginning-of-sequence token."""

    @property
    def decoder_start_token_id(self):
        tokenizer = self.tokenizer
        if (
            self._decoder_start_token_id is None
            and self._packer() is None
            and tokenizer is not None
            and getattr(tokenizer, "bos_token_id", None) is not None
        ):
            return int(tokenizer.bos_token_id)
        return super().decoder_start_token_id

    def logits(self, hidden_states):
        logits = self.backbone.decoder_token_embedding(
            hidden_states, reverse=True
        )
        cap = self.backbone.final_logit_softcapping
        if cap is None:
            return logits
        cap = ops.cast(cap, logits.dtype)
        return ops.tanh(logits / cap) * cap


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class T5GemmaSeq2SeqLM(_T5GemmaHead, Seq2SeqLM):
    """A `T5GemmaBackbone` and its head: the decoder's token table
    reversed, soft-capped by the backbone's `final_logit_softcapping`.

    `generate` runs the encoder once, computes every decoder block's
    cross-attention keys and values once (laid out like the
    self-attention caches: key/value heads on the model axis where they
    divide it, the batch on the batch axes), then decodes a token per
    step. Text prompts start the decoder with the tokenizer's `"bos"`
    token, as T5Gemma's `decoder_start_token_id` (2) says.

    Args:
        backbone: a `T5GemmaBackbone`.
        preprocessor: optional `Tokenizer` (see `Seq2SeqLM`).
        **kwargs: forwarded to `keras.Model`.

    Example:

    ```python
    import numpy as np
    import keras_nlp

    backbone = keras_nlp.models.T5GemmaBackbone(
        vocabulary_size=64,
        encoder_hidden_dim=16, encoder_intermediate_dim=32,
        encoder_num_layers=1, encoder_num_attention_heads=2,
        encoder_num_key_value_heads=1, encoder_head_dim=8,
        encoder_layer_types=["full_attention"],
        decoder_hidden_dim=16, decoder_intermediate_dim=32,
        decoder_num_layers=1, decoder_num_attention_heads=2,
        decoder_num_key_value_heads=1, decoder_head_dim=8,
        decoder_layer_types=["full_attention"],
        final_logit_softcapping=30.0,
    )
    seq2seq_lm = keras_nlp.models.T5GemmaSeq2SeqLM(backbone)
    outputs = seq2seq_lm.generate(
        {
            "encoder_token_ids": np.array([[5, 6, 1]], "int32"),
            "encoder_padding_mask": np.array([[1, 1, 1]], "int32"),
            "decoder_token_ids": np.array([[2, 0, 0, 0]], "int32"),
            "decoder_padding_mask": np.array([[1, 0, 0, 0]], "int32"),
        },
        stop_token_ids=None,
    )
    outputs["decoder_token_ids"].shape  # (1, 4)
    ```
    """

    backbone_cls = T5GemmaBackbone


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class T5Gemma2Seq2SeqLM(_T5GemmaHead, Seq2SeqLM):
    """A `T5Gemma2Backbone` (text) and its head, as `T5GemmaSeq2SeqLM`.

    Each decoder block's one merged attention holds two caches: the
    decoder's own keys and values, written a step at a time, and the
    encoder's, computed once; both follow its key kernel's layout.

    Args:
        backbone: a `T5Gemma2Backbone`.
        preprocessor: optional `Tokenizer` (see `Seq2SeqLM`).
        **kwargs: forwarded to `keras.Model`.

    Example:

    ```python
    import numpy as np
    import keras_nlp

    backbone = keras_nlp.models.T5Gemma2Backbone(
        vocabulary_size=64,
        encoder_hidden_dim=16, encoder_intermediate_dim=32,
        encoder_num_layers=1, encoder_num_attention_heads=2,
        encoder_num_key_value_heads=1, encoder_head_dim=8,
        encoder_layer_types=["full_attention"],
        decoder_hidden_dim=16, decoder_intermediate_dim=32,
        decoder_num_layers=1, decoder_num_attention_heads=2,
        decoder_num_key_value_heads=1, decoder_head_dim=8,
        decoder_layer_types=["full_attention"],
    )
    seq2seq_lm = keras_nlp.models.T5Gemma2Seq2SeqLM(backbone)
    outputs = seq2seq_lm.generate(
        {
            "encoder_token_ids": np.array([[5, 6, 1]], "int32"),
            "encoder_padding_mask": np.array([[1, 1, 1]], "int32"),
            "decoder_token_ids": np.array([[2, 0, 0, 0]], "int32"),
            "decoder_padding_mask": np.array([[1, 0, 0, 0]], "int32"),
        },
        stop_token_ids=None,
    )
    outputs["decoder_token_ids"].shape  # (1, 4)
    ```
    """

    backbone_cls = T5Gemma2Backbone


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
