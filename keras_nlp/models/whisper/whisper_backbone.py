"""Whisper encoder-decoder backbone (speech to text)."""

import keras
import numpy as np
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import MODEL
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.layers.layout_rules import position_embedding_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.layers.token_and_position_embedding import PositionEmbedding
from keras_nlp.layers.token_and_position_embedding import (
    TokenAndPositionEmbedding,
)
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.construction import check_heads_divide
from keras_nlp.models.families.seq2seq import decode_blocks_with_cache
from keras_nlp.models.families.seq2seq import init_seq2seq_graph
from keras_nlp.models.families.seq2seq import seq2seq_block_rules
from keras_nlp.models.families.seq2seq import seq2seq_blocks
from keras_nlp.models.whisper.whisper_presets import WHISPER_PRESETS

DECODER_EMBEDDINGS = "decoder_token_and_position_embedding/"
CONV = "encoder_token_embedding_conv_layer_{}"
# The front end's Conv1D kernels: (window, mels, filters) and
# (window, channels, filters); `filters` is the hidden width they produce.
CONV_1_DIMS = ("window", "mels", "filters")
CONV_2_DIMS = ("window", "channels", "filters")


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class WhisperSinusoids(keras.initializers.Initializer):
    """Whisper's fixed encoder positions: `[sin, cos]` of each position
    over `hidden // 2` geometric timescales from 1 to 10000."""

    def __call__(self, shape, dtype=None):
        length, channels = shape
        increment = np.log(10000.0) / (channels // 2 - 1)
        inverse = np.exp(-increment * np.arange(channels // 2))
        angles = np.arange(length)[:, None] * inverse[None, :]
        table = np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
        return ops.convert_to_tensor(table, dtype=dtype or "float32")


class WhisperBackbone(Backbone):
    """Whisper: an audio encoder and a causal text decoder that reads it.

    The encoder embeds log-mel frames with two GELU convolutions of width
    3 (the second of stride 2, halving the frames), adds fixed sinusoidal
    positions, then runs `num_layers` pre-norm blocks of multi-head
    self-attention and a GELU feed-forward and a final LayerNorm. The
    decoder embeds tokens plus learned positions, then runs `num_layers`
    pre-norm blocks of causal self-attention, cross-attention over the
    encoder's outputs and the feed-forward, and a final LayerNorm. Every
    projection has a bias but the attention keys'.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Blocks of the encoder, and of the decoder.
        num_heads: int. Attention heads; must divide `hidden_dim`.
        hidden_dim: int. Width of the residual streams.
        intermediate_dim: int. Width of each feed-forward's hidden layer.
        num_mels: int. Mel bins per input frame. Defaults to `80`.
        dropout: float. Dropout rate in training: on the embeddings, the
            attention probabilities and every residual branch. Defaults to
            `0.0`.
        max_encoder_sequence_length: int. The most input frames; the
            encoder's position table has half as many rows. Defaults to
            `3000`.
        max_decoder_sequence_length: int. Rows of the decoder's position
            table. Defaults to `448`.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Returns (when called):
        `{"encoder_sequence_output": (batch, (frames + 1) // 2,
        hidden_dim), "decoder_sequence_output": (batch, target_len,
        hidden_dim)}`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models import WhisperBackbone

    model = WhisperBackbone(
        vocabulary_size=100,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        num_mels=16,
        max_encoder_sequence_length=20,
        max_decoder_sequence_length=8,
    )
    outputs = model(
        {
            "encoder_features": np.random.rand(1, 20, 16).astype("float32"),
            "decoder_token_ids": np.array([[50, 7, 9]], "int32"),
            "decoder_padding_mask": np.array([[1, 1, 1]], "int32"),
        }
    )
    outputs["encoder_sequence_output"].shape  # (1, 10, 32)
    outputs["decoder_sequence_output"].shape  # (1, 3, 32)
    ```
    """

    # Sequence and context parallelism split one length, `token_ids`: here
    # encoder and decoder sequences differ in length.
    sequence_splittable = False

    presets = WHISPER_PRESETS

    @staticmethod
    def _layout_rules(config):
        # English vocabularies (51864) divide every model axis, the odd
        # multilingual one (51865) none: its hidden dimension takes it.
        # Heads on the model axis, hidden where they don't divide it (tiny's
        # 6, large's 20 on 8), in both stacks and the cross-attention. The
        # convolutions put the width they produce on the model axis.
        return [
            *token_embedding_rules(
                DECODER_EMBEDDINGS + "token_embedding/", tied=True
            ),
            *position_embedding_rules(
                DECODER_EMBEDDINGS + "position_embedding/"
            ),
            *position_embedding_rules("encoder_position_embedding/"),
            named_rule(
                CONV.format(1) + "/kernel",
                CONV_1_DIMS,
                {"filters": MODEL, "mels": DATA},
            ),
            named_rule(
                CONV.format(2) + "/kernel",
                CONV_2_DIMS,
                {"filters": MODEL, "channels": DATA},
            ),
            *seq2seq_block_rules(),
        ]

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        num_mels=80,
        dropout=0.0,
        max_encoder_sequence_length=3000,
        max_decoder_sequence_length=448,
        dtype=None,
        **kwargs,
    ):
        check_heads_divide(hidden_dim, num_heads)
        initializer = keras.initializers.TruncatedNormal(stddev=0.02)
        blocks = dict(
            num_layers=num_layers,
            num_heads=num_heads,
            hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            dropout=dropout,
            initializer=initializer,
            dtype=dtype,
            # Pre-norm, and no bias on the attention keys.
            normalize_first=True,
            use_key_bias=False,
        )
        self._add_encoder_layers(max_encoder_sequence_length, blocks)
        self._add_decoder_layers(
            vocabulary_size, max_decoder_sequence_length, blocks
        )
        inputs = {
            "encoder_features": keras.Input(
                shape=(None, num_mels), dtype="float32", name="encoder_features"
            ),
            "decoder_token_ids": keras.Input(
                shape=(None,), dtype="int32", name="decoder_token_ids"
            ),
            "decoder_padding_mask": keras.Input(
                shape=(None,), dtype="int32", name="decoder_padding_mask"
            ),
        }
        init_seq2seq_graph(
            self,
            inputs,
            encoder_output=self.encode(inputs["encoder_features"]),
            decoder_input=self._embed_decoder(inputs["decoder_token_ids"]),
            final_norm=self.decoder_layer_norm,
            dtype=dtype,
            **kwargs,
        )

    def _add_encoder_layers(self, max_sequence_length, blocks):
        """Adds the audio encoder's layers: convolutions, fixed positions,
        pre-norm blocks without key biases and a final LayerNorm.

        `blocks` (`seq2seq_blocks`'s arguments) also give the width, the
        dropout rate and the dtype of the other layers.
        """
        hidden_dim = blocks["hidden_dim"]
        dtype = blocks["dtype"]
        self.encoder_conv_layers = [
            declare_dims(
                keras.layers.Conv1D(
                    hidden_dim,
                    kernel_size=3,
                    strides=strides,
                    padding=padding,
                    # Keras's "gelu" is the exact (erf) one.
                    activation="gelu",
                    dtype=dtype,
                    name=CONV.format(index),
                ),
                kernel=dims,
            )
            for index, strides, padding, dims in (
                (1, 1, "same", CONV_1_DIMS),
                # Padded explicitly in the graph: "same" would pad one side
                # only.
                (2, 2, "valid", CONV_2_DIMS),
            )
        ]
        # Fixed, as in the checkpoints: never trained.
        self.encoder_position_embedding = PositionEmbedding(
            sequence_length=max_sequence_length // 2,
            initializer=WhisperSinusoids(),
            trainable=False,
            dtype=dtype,
            name="encoder_position_embedding",
        )
        self.encoder_embeddings_dropout = keras.layers.Dropout(
            blocks["dropout"],
            dtype=dtype,
            name="encoder_embeddings_dropout",
        )
        self.encoder_transformer_layers = seq2seq_blocks("encoder", **blocks)
        self.encoder_layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-5, dtype=dtype, name="encoder_layer_norm"
        )

    def _add_decoder_layers(self, vocabulary_size, max_sequence_length, blocks):
        """Adds the text decoder's layers: token and learned position
        tables, pre-norm blocks with cross-attention and a final LayerNorm,
        from `blocks` as in `_add_encoder_layers`.
        """
        dtype = blocks["dtype"]
        self.decoder_embeddings = TokenAndPositionEmbedding(
            vocabulary_size=vocabulary_size,
            sequence_length=max_sequence_length,
            embedding_dim=blocks["hidden_dim"],
            embeddings_initializer=blocks["initializer"],
            dtype=dtype,
            name=DECODER_EMBEDDINGS[:-1],
        )
        self.token_embedding = self.decoder_embeddings.token_embedding
        self.decoder_embeddings_dropout = keras.layers.Dropout(
            blocks["dropout"],
            dtype=dtype,
            name="decoder_embeddings_dropout",
        )
        self.decoder_transformer_layers = seq2seq_blocks("decoder", **blocks)
        self.decoder_layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-5, dtype=dtype, name="decoder_layer_norm"
        )

    # === The two stacks, also run apart (`WhisperAudioToText.generate`) ===

    def encode(self, features):
        """The encoder's output `(batch, (frames + 1) // 2, hidden_dim)` of
        log-mel `features` `(batch, frames, num_mels)`."""
        first, second = self.encoder_conv_layers
        x = first(features)
        # One frame of zeros each side, then a valid stride-2 window:
        # frames become (frames + 1) // 2.
        x = second(ops.pad(x, ((0, 0), (1, 1), (0, 0))))
        x = self.encoder_embeddings_dropout(
            x + self.encoder_position_embedding(x)
        )
        for block in self.encoder_transformer_layers:
            x = block(x)
        return self.encoder_layer_norm(x)

    def _embed_decoder(self, token_ids, start_index=0):
        x = self.decoder_embeddings(token_ids, start_index=start_index)
        return self.decoder_embeddings_dropout(x)

    def decode_with_cache(
        self,
        token_ids,
        self_attention_caches,
        cross_attention_caches,
        cache_update_index,
        encoder_padding_mask=None,
        pin=None,
    ):
        """Runs decoder tokens through the blocks with key/value caches.

        Arguments as `BartBackbone.decode_with_cache`; the audio frames
        have no padding, so `encoder_padding_mask` is `None`.

        Returns:
            `(hidden states (batch, seq, hidden_dim) after the decoder's
            final LayerNorm, updated caches)`.
        """
        x, updated = decode_blocks_with_cache(
            self.decoder_transformer_layers,
            self._embed_decoder(token_ids, cache_update_index),
            self_attention_caches,
            cross_attention_caches,
            cache_update_index,
            encoder_padding_mask,
            pin,
        )
        return self.decoder_layer_norm(x), updated
