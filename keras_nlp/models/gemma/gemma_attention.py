"""Gemma self-attention: multi-head, grouped-query or multi-query."""

import keras
from keras import ops

from keras_nlp.layers.grouped_query_attention import grouped_query_attention
from keras_nlp.layers.rotary_embedding import RotaryEmbedding


class GemmaAttention(keras.layers.Layer):
    """Self-attention with RoPE, shared key/value heads and Gemma 2 options.

    Queries use `num_query_heads` heads; keys and values use
    `num_key_value_heads` heads, each shared by a group of
    `num_query_heads // num_key_value_heads` consecutive query heads (one
    shared head is multi-query attention, equal counts is ordinary multi-head
    attention). Rotary position embedding is applied to queries and keys.

    Args:
        num_query_heads: int. Number of query heads.
        num_key_value_heads: int. Number of key/value heads; must divide
            `num_query_heads`.
        head_dim: int. Size of every query, key and value head.
        query_head_dim_normalize: bool. If `True` queries are scaled by
            `head_dim ** -0.5`, otherwise by
            `(hidden_dim // num_query_heads) ** -0.5`. Defaults to `True`.
        logit_soft_cap: float or `None`. If set, attention logits are
            squashed to `cap * tanh(logits / cap)` before the softmax.
        use_sliding_window_attention: bool. If `True`, a query at position
            `i` only attends to keys at positions `j` with
            `|i - j| < sliding_window_size` (on top of the given mask).
        sliding_window_size: int. Width of the sliding window.
        dropout: float. Dropout rate on the attention probabilities.
        **kwargs: Forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: Tensor of shape `(batch, seq, hidden_dim)`.
        attention_mask: Optional boolean/integer tensor of shape
            `(batch, seq, seq)`; entry `[b, i, j]` says whether query `i` may
            attend to key `j`. Query rows without any allowed key output
            zeros.
        training: bool. Enables dropout.
    """

    def __init__(
        self,
        num_query_heads,
        num_key_value_heads,
        head_dim,
        query_head_dim_normalize=True,
        logit_soft_cap=None,
        use_sliding_window_attention=False,
        sliding_window_size=4096,
        dropout=0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if num_query_heads % num_key_value_heads != 0:
            raise ValueError(
                "`num_query_heads` must be a multiple of "
                f"`num_key_value_heads`. Received: num_query_heads="
                f"{num_query_heads}, num_key_value_heads="
                f"{num_key_value_heads}."
            )
        self.num_query_heads = num_query_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = head_dim
        self.query_head_dim_normalize = query_head_dim_normalize
        self.logit_soft_cap = logit_soft_cap
        self.use_sliding_window_attention = use_sliding_window_attention
        self.sliding_window_size = sliding_window_size
        self.dropout = dropout

    def build(self, input_shape):
        self.hidden_dim = input_shape[-1]
        heads_shape = (None, None, self.num_query_heads, self.head_dim)

        self.query_dense = keras.layers.EinsumDense(
            "btd,ndh->btnh",
            output_shape=(None, self.num_query_heads, self.head_dim),
            dtype=self.dtype_policy,
            name="query",
        )
        self.query_dense.build(input_shape)

        self.key_dense = keras.layers.EinsumDense(
            "bsd,kdh->bskh",
            output_shape=(None, self.num_key_value_heads, self.head_dim),
            dtype=self.dtype_policy,
            name="key",
        )
        self.key_dense.build(input_shape)

        self.value_dense = keras.layers.EinsumDense(
            "bsd,kdh->bskh",
            output_shape=(None, self.num_key_value_heads, self.head_dim),
            dtype=self.dtype_policy,
            name="value",
        )
        self.value_dense.build(input_shape)

        self.output_dense = keras.layers.EinsumDense(
            "btnh,nhd->btd",
            output_shape=(None, self.hidden_dim),
            dtype=self.dtype_policy,
            name="attention_output",
        )
        self.output_dense.build(heads_shape)

        self.rotary_embedding = RotaryEmbedding(
            max_wavelength=10000, dtype=self.dtype_policy, name="rotary"
        )
        self.probabilities_dropout = keras.layers.Dropout(
            rate=self.dropout, dtype=self.dtype_policy, name="dropout"
        )

    def _query_scale(self):
        if self.query_head_dim_normalize:
            return self.head_dim**-0.5
        return (self.hidden_dim // self.num_query_heads) ** -0.5

    def _sliding_window_mask(self, query_len, key_len):
        """Boolean `(1, query_len, key_len)` mask of `|i - j| < window`."""
        i = ops.arange(query_len, dtype="int32")[:, None]
        j = ops.arange(key_len, dtype="int32")[None, :]
        return ops.expand_dims(
            ops.abs(i - j) < self.sliding_window_size, axis=0
        )

    def call(self, inputs, attention_mask=None, training=None):
        query = self.rotary_embedding(self.query_dense(inputs))
        key = self.rotary_embedding(self.key_dense(inputs))
        value = self.value_dense(inputs)
        # keras-hub additionally interleaves the two rotated halves of the
        # query and key features; that is the same permutation on both, so
        # query-key dot products (and hence outputs) are unchanged without it.

        mask = None
        if attention_mask is not None:
            attention_mask = ops.cast(attention_mask, "bool")
            mask = attention_mask
        if self.use_sliding_window_attention:
            window = self._sliding_window_mask(
                ops.shape(query)[1], ops.shape(key)[1]
            )
            mask = window if mask is None else ops.logical_and(mask, window)

        query = query * ops.cast(self._query_scale(), query.dtype)
        outputs = grouped_query_attention(
            query,
            key,
            value,
            mask,
            logit_soft_cap=self.logit_soft_cap,
            probabilities_dropout=(
                self.probabilities_dropout if self.dropout > 0 else None
            ),
            training=training,
        )

        if attention_mask is not None:
            # Query rows that may attend to nothing (e.g. left padding) would
            # get an arbitrary average; zero them. The check uses the mask as
            # passed in, before the sliding window, like keras-hub.
            has_keys = ops.any(attention_mask, axis=-1)[:, :, None, None]
            outputs = ops.where(has_keys, outputs, ops.zeros_like(outputs))
        return self.output_dense(outputs)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_query_heads": self.num_query_heads,
                "num_key_value_heads": self.num_key_value_heads,
                "head_dim": self.head_dim,
                "query_head_dim_normalize": self.query_head_dim_normalize,
                "logit_soft_cap": self.logit_soft_cap,
                "use_sliding_window_attention": (
                    self.use_sliding_window_attention
                ),
                "sliding_window_size": self.sliding_window_size,
                "dropout": self.dropout,
            }
        )
        return config
