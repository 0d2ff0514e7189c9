"""BART encoder-decoder backbone."""

import keras

from keras_nlp.layers.layout_rules import position_embedding_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.layers.token_and_position_embedding import PositionEmbedding
from keras_nlp.layers.token_and_position_embedding import token_embedding
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.bart.bart_presets import BART_PRESETS
from keras_nlp.models.construction import check_heads_divide
from keras_nlp.models.families.seq2seq import decode_blocks_with_cache
from keras_nlp.models.families.seq2seq import init_seq2seq_graph
from keras_nlp.models.families.seq2seq import seq2seq_block_rules
from keras_nlp.models.families.seq2seq import seq2seq_blocks


class BartBackbone(Backbone):
    """BART: a bidirectional encoder and a causal decoder that reads it.

    One token embedding, shared by both sides, plus a learned position
    table per side, then a LayerNorm and dropout. The encoder is
    `num_layers` post-norm blocks of multi-head self-attention and a GELU
    feed-forward; the decoder is `num_layers` post-norm blocks of causal
    self-attention, cross-attention over the encoder's outputs and the
    same feed-forward. Every projection has a bias; every LayerNorm has
    epsilon 1e-5.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Blocks of the encoder, and of the decoder.
        num_heads: int. Attention heads; must divide `hidden_dim`.
        hidden_dim: int. Width of the embeddings and residual streams.
        intermediate_dim: int. Width of each feed-forward's hidden layer.
        dropout: float. Dropout rate in training: on the embeddings, the
            attention probabilities and every residual branch. Defaults to
            `0.1`.
        max_sequence_length: int. Rows of each position table, the longest
            input either side takes. Defaults to `1024`.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Returns (when called):
        `{"encoder_sequence_output": (batch, source_len, hidden_dim),
        "decoder_sequence_output": (batch, target_len, hidden_dim)}`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models import BartBackbone

    model = BartBackbone(
        vocabulary_size=100,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=16,
    )
    outputs = model(
        {
            "encoder_token_ids": np.array([[0, 7, 9, 2, 1]], "int32"),
            "encoder_padding_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
            "decoder_token_ids": np.array([[2, 0, 7]], "int32"),
            "decoder_padding_mask": np.array([[1, 1, 1]], "int32"),
        }
    )
    outputs["encoder_sequence_output"].shape  # (1, 5, 32)
    outputs["decoder_sequence_output"].shape  # (1, 3, 32)
    ```
    """

    # Sequence and context parallelism split one length, `token_ids`: here
    # encoder and decoder sequences differ in length.
    sequence_splittable = False

    presets = BART_PRESETS

    @staticmethod
    def _layout_rules(config):
        # The odd vocabulary (50265) divides no model axis: the table's
        # hidden dimension takes it. Both sides' heads go on the model
        # axis (hidden where they don't divide it, e.g. base's 12 on 8).
        return [
            *token_embedding_rules("token_embedding/", tied=True),
            *position_embedding_rules("encoder_position_embedding/"),
            *position_embedding_rules("decoder_position_embedding/"),
            *seq2seq_block_rules(),
        ]

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        max_sequence_length=1024,
        dtype=None,
        **kwargs,
    ):
        check_heads_divide(hidden_dim, num_heads)
        initializer = keras.initializers.TruncatedNormal(stddev=0.02)
        self.token_embedding = token_embedding(
            vocabulary_size,
            hidden_dim,
            initializer=initializer,
            dtype=dtype,
        )
        sides = {}
        for side in ("encoder", "decoder"):
            position = PositionEmbedding(
                sequence_length=max_sequence_length,
                initializer=initializer,
                dtype=dtype,
                name=f"{side}_position_embedding",
            )
            norm = keras.layers.LayerNormalization(
                epsilon=1e-5, dtype=dtype, name=f"{side}_embeddings_layer_norm"
            )
            drop = keras.layers.Dropout(
                dropout, dtype=dtype, name=f"{side}_embeddings_dropout"
            )
            sides[side] = (position, norm, drop)
        self.encoder_position_embedding = sides["encoder"][0]
        self.decoder_position_embedding = sides["decoder"][0]
        blocks = dict(
            num_layers=num_layers,
            num_heads=num_heads,
            hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            dropout=dropout,
            initializer=initializer,
            dtype=dtype,
        )
        self.encoder_transformer_layers = seq2seq_blocks("encoder", **blocks)
        self.decoder_transformer_layers = seq2seq_blocks("decoder", **blocks)

        def embed(token_ids, side):
            position, norm, drop = sides[side]
            x = self.token_embedding(token_ids)
            return drop(norm(x + position(x)))

        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in (
                "encoder_token_ids",
                "encoder_padding_mask",
                "decoder_token_ids",
                "decoder_padding_mask",
            )
        }
        x = embed(inputs["encoder_token_ids"], "encoder")
        for block in self.encoder_transformer_layers:
            x = block(x, padding_mask=inputs["encoder_padding_mask"])
        init_seq2seq_graph(
            self,
            inputs,
            encoder_output=x,
            decoder_input=embed(inputs["decoder_token_ids"], "decoder"),
            dtype=dtype,
            **kwargs,
        )

    # === Cached decoding (`BartSeq2SeqLM.generate`) ===

    def _embed(self, token_ids, side, start_index=0):
        position = getattr(self, f"{side}_position_embedding")
        norm = self.get_layer(f"{side}_embeddings_layer_norm")
        drop = self.get_layer(f"{side}_embeddings_dropout")
        x = self.token_embedding(token_ids)
        return drop(norm(x + position(x, start_index=start_index)))

    def encode(self, token_ids, padding_mask):
        """The encoder's output `(batch, source_len, hidden_dim)`."""
        x = self._embed(token_ids, "encoder")
        for block in self.encoder_transformer_layers:
            x = block(x, padding_mask=padding_mask)
        return x

    def decode_with_cache(
        self,
        token_ids,
        self_attention_caches,
        cross_attention_caches,
        cache_update_index,
        encoder_padding_mask,
        pin=None,
    ):
        """Runs decoder tokens through the blocks with key/value caches.

        Args:
            token_ids: int `(batch, seq)`, the tokens of slots
                `cache_update_index ... + seq - 1`.
            self_attention_caches: one `(batch, 2, max_len, heads,
                head_dim)` per block.
            cross_attention_caches: each block's `cross_attention_cache`
                of the encoder's output.
            cache_update_index: int or scalar tensor.
            encoder_padding_mask: `(batch, source_len)`.
            pin: optional `pin(number, x, cache) -> (x, cache)` applied
                after each block (layouts while sharded).

        Returns:
            `(hidden states (batch, seq, hidden_dim), updated caches)`.
        """
        return decode_blocks_with_cache(
            self.decoder_transformer_layers,
            self._embed(token_ids, "decoder", cache_update_index),
            self_attention_caches,
            cross_attention_caches,
            cache_update_index,
            encoder_padding_mask,
            pin,
        )
