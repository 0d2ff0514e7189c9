"""The cross-attention decoder block of the encoder-decoder backbones."""

import keras
from keras import ops

from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.cached_attention import decoder_attention_mask
from keras_nlp.layers.common import check_rates
from keras_nlp.layers.common import feedforward_denses
from keras_nlp.layers.dense import fresh_initializer
from keras_nlp.layers.remat import RematBlock
from keras_nlp.layers.transformer_encoder import encoder_attention_mask

# keras-hub's `TransformerDecoder` names, which are the checkpoints' paths.
SELF_ATTENTION = "self_attention"
CROSS_ATTENTION = "cross_attention"


def attend_self(attention, inputs, mask, cache, start_index, training, updated):
    """A decoder block's self-attention, with its cache when given.

    The updated cache is appended to `updated` (the branch returns only
    the outputs, for the residual around it).
    """
    if cache is None:
        return attention(inputs, attention_mask=mask, training=training)
    outputs, cache = attention(
        inputs,
        attention_mask=mask,
        cache=cache,
        cache_update_index=start_index,
        training=training,
    )
    updated.append(cache)
    return outputs


def attend_encoder(attention, inputs, mask, encoder_sequence, cache, training):
    """A decoder block's cross-attention over the encoder's outputs, or
    over their keys and values cached once per source."""
    if cache is not None:
        source = {"key_value_cache": cache}
    else:
        source = {"key_value_inputs": encoder_sequence}
    return attention(inputs, attention_mask=mask, training=training, **source)


def check_encoder_source(block, encoder_sequence, cross_attention_cache):
    """A decoder block reads the encoder's outputs or their cache."""
    if encoder_sequence is None and cross_attention_cache is None:
        raise ValueError(
            f"{type(block).__name__} needs the encoder's outputs: pass "
            "`encoder_sequence` or `cross_attention_cache`."
        )


@keras.saving.register_keras_serializable(package="keras_nlp.layers")
class CrossAttentionDecoderBlock(RematBlock, keras.layers.Layer):
    """Causal self-attention, cross-attention, then a feed-forward.

    The decoder block of BART (post-norm) and Whisper (pre-norm,
    `normalize_first=True`). Each of its three branches is

        post-norm: x = norm(x + dropout(branch(x)))
        pre-norm:  x = x + dropout(branch(norm(x)))

    `self_attention` attends causally over the decoder's real tokens;
    `cross_attention` takes queries from the decoder and keys and values
    from the encoder's outputs (`encoder_sequence`); the feed-forward is
    `output(act(intermediate(x)))`. Both attentions are multi-head
    `CachedGroupedQueryAttention`s with biases on every projection (but
    the key's with `use_key_bias=False`).

    Args:
        num_heads: int. Attention heads of both attentions.
        hidden_dim: int. Width of the residual stream (and of the encoder's
            outputs).
        intermediate_dim: int. Width of the feed-forward.
        activation: str. Feed-forward activation.
        layer_norm_epsilon: float. Epsilon of the three LayerNorms.
        dropout: float. Dropout on the attention probabilities and on each
            branch before its residual add.
        normalize_first: bool. Pre-norm instead of post-norm.
        use_key_bias: bool. Biases on the key projections (Whisper has
            none).
        kernel_initializer: initializer of every kernel.
        bias_initializer: initializer of the feed-forward's biases.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        decoder_sequence: `(batch, target_len, hidden)`.
        encoder_sequence: `(batch, source_len, hidden)`.
        decoder_padding_mask: optional `(batch, target_len)`, non-zero for
            real tokens.
        encoder_padding_mask: optional `(batch, source_len)`, non-zero for
            real tokens.
        training: bool. Enables dropout.
        self_attention_cache: optional `(batch, 2, max_len, heads,
            head_dim)` keys and values of the self-attention, for cached
            decoding: the tokens are written at
            `self_attention_cache_update_index` and attend to every slot
            up to theirs; `decoder_padding_mask`, if given, then covers
            the `max_len` slots.
        self_attention_cache_update_index: int or scalar tensor, the slot
            of the first decoder token (with a cache).
        cross_attention_cache: optional `(batch, 2, source_len, heads,
            head_dim)` keys and values of the encoder's outputs (see
            `cross_attention_cache`), read instead of `encoder_sequence`.

    Returns:
        `(batch, target_len, hidden)`, or `(outputs, self_attention_cache)`
        when a self-attention cache is given.

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers import CrossAttentionDecoderBlock

    block = CrossAttentionDecoderBlock(
        num_heads=4, hidden_dim=32, intermediate_dim=64
    )
    decoder = np.random.rand(2, 5, 32).astype("float32")
    encoder = np.random.rand(2, 7, 32).astype("float32")
    block(decoder, encoder).shape  # (2, 5, 32)

    # Cached decoding: keys and values of the encoder once, then a token.
    cross = block.cross_attention_cache(encoder)  # (2, 2, 7, 4, 8)
    cache = np.zeros((2, 2, 5, 4, 8), "float32")
    step, cache = block(
        decoder[:, :1],
        self_attention_cache=cache,
        self_attention_cache_update_index=0,
        cross_attention_cache=cross,
    )
    ```
    """

    def __init__(
        self,
        num_heads,
        hidden_dim,
        intermediate_dim,
        activation="gelu",
        layer_norm_epsilon=1e-5,
        dropout=0.0,
        normalize_first=False,
        use_key_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_rates(dropout=dropout)
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = dropout
        self.normalize_first = normalize_first
        self.use_key_bias = use_key_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

        self.self_attention = self._attention(SELF_ATTENTION)
        self.self_attention_norm = self._norm("self_attention_layer_norm")
        self.cross_attention = self._attention(CROSS_ATTENTION)
        self.cross_attention_norm = self._norm("cross_attention_layer_norm")
        dense_options = dict(
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
        )
        self.intermediate_dense, self.output_dense = feedforward_denses(
            hidden_dim,
            intermediate_dim,
            activation,
            ("feedforward_intermediate_dense", "feedforward_output_dense"),
            **dense_options,
        )
        self.feedforward_norm = self._norm("feedforward_layer_norm")
        self.branch_dropouts = [
            keras.layers.Dropout(dropout, dtype=self.dtype_policy, name=name)
            for name in (
                "self_attention_dropout",
                "cross_attention_dropout",
                "feedforward_dropout",
            )
        ]

    def _attention(self, name):
        return CachedGroupedQueryAttention(
            num_query_heads=self.num_heads,
            num_key_value_heads=self.num_heads,
            use_bias=True,
            use_output_bias=True,
            use_key_bias=self.use_key_bias,
            dropout=self.dropout,
            kernel_initializer=fresh_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def _norm(self, name):
        return keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        shape = decoder_sequence_shape
        # keras-hub's order, so the variables list alike.
        self.self_attention.build(shape)
        self.self_attention_norm.build(shape)
        # Keys and values read the encoder's outputs, as wide as `shape`.
        self.cross_attention.build(shape)
        self.cross_attention_norm.build(shape)
        self.intermediate_dense.build(shape)
        self.output_dense.build((*shape[:-1], self.intermediate_dim))
        self.feedforward_norm.build(shape)

    def _branch(self, x, norm, dropout, branch, training):
        if self.normalize_first:
            return x + dropout(branch(norm(x)), training=training)
        return norm(x + dropout(branch(x), training=training))

    def cross_attention_cache(self, encoder_sequence):
        """The cross-attention's keys and values of the encoder's outputs.

        Computed once per source, then read by every decoding step.

        Args:
            encoder_sequence: `(batch, source_len, hidden)`.

        Returns:
            `(batch, 2, source_len, heads, head_dim)`.
        """
        return self.cross_attention.key_value_cache(encoder_sequence)

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        training=None,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
    ):
        check_encoder_source(self, encoder_sequence, cross_attention_cache)
        shape = ops.shape(decoder_sequence)
        key_length = shape[1]
        start_index = 0
        if self_attention_cache is not None:
            key_length = ops.shape(self_attention_cache)[2]
            start_index = self_attention_cache_update_index
        self_mask = decoder_attention_mask(
            shape[0],
            shape[1],
            key_length,
            padding_mask=decoder_padding_mask,
            start_index=start_index,
        )
        cross_mask = None
        if encoder_padding_mask is not None:
            cross_mask = encoder_attention_mask(encoder_padding_mask, shape[1])
        self_dropout, cross_dropout, feedforward_dropout = self.branch_dropouts
        updated = []

        def self_attend(y):
            return attend_self(
                self.self_attention,
                y,
                self_mask,
                self_attention_cache,
                start_index,
                training,
                updated,
            )

        def cross_attend(y):
            return attend_encoder(
                self.cross_attention,
                y,
                cross_mask,
                encoder_sequence,
                cross_attention_cache,
                training,
            )

        x = self._branch(
            decoder_sequence,
            self.self_attention_norm,
            self_dropout,
            self_attend,
            training,
        )
        x = self._branch(
            x, self.cross_attention_norm, cross_dropout, cross_attend, training
        )
        x = self._branch(
            x,
            self.feedforward_norm,
            feedforward_dropout,
            lambda y: self.output_dense(self.intermediate_dense(y)),
            training,
        )
        return x if self_attention_cache is None else (x, updated[0])

    def compute_output_shape(self, decoder_sequence_shape, *args, **kwargs):
        return decoder_sequence_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "dropout": self.dropout,
                "normalize_first": self.normalize_first,
                "use_key_bias": self.use_key_bias,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self.bias_initializer
                ),
            }
        )
        return config
