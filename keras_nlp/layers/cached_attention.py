"""Decoder self-attention with a key/value cache, shared by the LLMs.

Keras's `GroupedQueryAttention` has the same kernels but no rotary
embedding, cache, sliding window, ALiBi or query/key norms, which these
checkpoints need; hence this layer.
"""

import math

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.distribution.dims import declare_einsum_dims
from keras_nlp.distribution.dims import einsum_dims
from keras_nlp.distribution.layout_map import pin_activation
from keras_nlp.distribution.layout_map import pin_input
from keras_nlp.layers.common import TakesLayers
from keras_nlp.layers.common import check_sublayer_keys
from keras_nlp.layers.fused_projection import project_together
from keras_nlp.layers.grouped_query_attention import grouped_query_attention
from keras_nlp.layers.rotary_embedding import rotate_leading
from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)

# The projections' einsum equations, and what each letter of them means.
EQUATIONS = {
    "query": "btd,dnh->btnh",
    "key": "bsd,dkh->bskh",
    "value": "bsd,dkh->bskh",
    "output": "btnh,nhd->btd",
    # Falcon, Bloom: the heads concatenated, `f = heads * head_dim`.
    "flat_output": "btf,fd->btd",
    # Gemma: heads-first kernels, e.g. query `(heads, hidden, head_dim)`.
    "heads_first_query": "btd,ndh->btnh",
    "heads_first_key": "bsd,kdh->bskh",
    "heads_first_value": "bsd,kdh->bskh",
}
LEGEND = dict(d="hidden", n="heads", k="kv_heads", h="head_dim", f="heads")
# The kernels' dimension names, e.g. query `(hidden, heads, head_dim)`.
KERNEL_DIMS = {
    kind: einsum_dims(equation, LEGEND) for kind, equation in EQUATIONS.items()
}

DEFAULT_SUBLAYER_NAMES = {
    "query": "query",
    "key": "key",
    "value": "value",
    "output": "attention_output",
    "query_norm": "query_dense_layernorm",
    "key_norm": "key_dense_layernorm",
}


def alibi_slopes(num_heads):
    """ALiBi's per-head slopes (Press et al.), as a list of floats.

    For `n` a power of two the slopes are `2 ** (-8 * i / n)`, `i = 1..n`.
    Otherwise the slopes of the largest power of two below `n` are followed
    by every other slope of twice that power.
    """
    closest = 2 ** math.floor(math.log2(num_heads))

    def powers(count):
        start = 2 ** (-8 / count)
        return [start ** (i + 1) for i in range(count)]

    slopes = powers(closest)
    if closest < num_heads:
        slopes += powers(2 * closest)[0::2][: num_heads - closest]
    return slopes


def decoder_attention_mask(
    batch_size, query_length, key_length, padding_mask=None, start_index=0
):
    """Boolean `(batch, query_length, key_length)` causal attention mask.

    Query `t` sits at position `start_index + t` (keys at `0..key_length-1`)
    and may attend to keys at or before it that `padding_mask` marks real.

    Args:
        batch_size: int or scalar tensor.
        query_length: int or scalar tensor.
        key_length: int or scalar tensor; larger than `query_length` when
            decoding into a cache.
        padding_mask: optional `(batch, key_length)` tensor, non-zero for
            real tokens.
        start_index: int or scalar tensor, position of the first query.

    Returns:
        Boolean tensor `(batch, query_length, key_length)`.
    """
    query_positions = ops.arange(query_length, dtype="int32") + ops.cast(
        start_index, "int32"
    )
    key_positions = ops.arange(key_length, dtype="int32")
    causal = query_positions[:, None] >= key_positions[None, :]
    mask = ops.broadcast_to(
        causal[None, :, :], (batch_size, query_length, key_length)
    )
    if padding_mask is not None:
        mask = ops.logical_and(mask, ops.cast(padding_mask, "bool")[:, None])
    return mask


def write_cache(cache, key, value, start_index):
    """Writes keys and values into a cache from position `start_index` on.

    Args:
        cache: `(batch, 2, max_len, kv_heads, head_dim)`.
        key, value: `(batch, seq, kv_heads, head_dim)`.
        start_index: int or scalar tensor.

    Returns:
        `(keys, values, cache)`: all `max_len` keys and values, and the
        updated cache.
    """
    start = [0, start_index, 0, 0]
    key = ops.slice_update(cache[:, 0], start, key)
    value = ops.slice_update(cache[:, 1], start, value)
    return key, value, ops.stack((key, value), axis=1)


def query_key_distance(query_length, key_length, start_index):
    """`(q, k)` int32: each query's position (from `start_index`) minus
    each key's (from 0)."""
    query_positions = ops.arange(query_length, dtype="int32") + ops.cast(
        start_index, "int32"
    )
    key_positions = ops.arange(key_length, dtype="int32")
    return query_positions[:, None] - key_positions[None, :]


def window_mask(distance, size, centered=False):
    """`(1, q, k)` boolean: the keys within each query's sliding window of
    `size` (the `size - 1` keys before it and itself; `centered`, half of
    them after it) at `query_key_distance`'s `distance`."""
    if centered:
        after = size // 2
        before = size - after - 1
        window = ops.logical_and(distance <= before, -distance <= after)
    else:
        window = distance < size
    return window[None, :, :]


def both_masks(attention_mask, window):
    """The caller's `attention_mask` (any dtype, or `None`) and a boolean
    position mask `window` (or `None`) both holding; `None` if neither."""
    mask = None if attention_mask is None else ops.cast(attention_mask, "bool")
    if window is not None:
        mask = window if mask is None else ops.logical_and(mask, window)
    return mask


@keras.saving.register_keras_serializable(package="keras_nlp.layers")
class CachedGroupedQueryAttention(TakesLayers, keras.layers.Layer):
    """Grouped-query self-attention with a key/value cache.

    `num_query_heads` query heads share `num_key_value_heads` key/value
    heads (equal counts is multi-head attention, one is multi-query). The
    kernels follow the Llama-family checkpoint layout: query/key/value
    `(hidden, heads, head_dim)`, output `(heads, head_dim, hidden)`, or a
    flat `(heads * head_dim, hidden)` output kernel when
    `flat_output_kernel=True` (Falcon, Bloom), or heads-first query/key/value
    kernels `(heads, hidden, head_dim)` when `heads_first=True` (Gemma).
    Options cover the variants of the decoder-only models in this library.

    Args:
        num_query_heads: int. Number of query heads.
        num_key_value_heads: int. Number of key/value heads; must divide
            `num_query_heads`.
        head_dim: int or `None`. Size of each head; `None` means
            `hidden_dim // num_query_heads`.
        rotary_embedding: a `keras_nlp.layers.RotaryEmbedding` (or subclass)
            applied to queries and keys, or `None` for no RoPE.
        use_query_key_norm: bool. RMS-normalize each query and key head
            over `head_dim` before RoPE (Qwen 3, Gemma 3).
        zero_centered_query_key_norm: bool. Those norms multiply by
            `1 + scale` (`ZeroCenteredRMSNormalization`, Gemma 3) instead
            of `scale`.
        layer_norm_epsilon: float. Epsilon of those norms.
        use_bias: bool. Biases on the query/key/value projections.
        use_key_bias: bool or `None`. Bias on the key projection; `None`
            means `use_bias`. Whisper has query and value biases but none
            on the key (softmax ignores a bias shared by every key).
        use_output_bias: bool. Bias on the output projection.
        flat_output_kernel: bool. Output kernel `(heads * head_dim, hidden)`
            instead of `(heads, head_dim, hidden)`.
        heads_first: bool. Query/key/value kernels `(heads, hidden,
            head_dim)` instead of `(hidden, heads, head_dim)`.
        sliding_window_size: int or `None`. If set, a query at position `i`
            attends only to keys `j` with `i - j < sliding_window_size`.
        centered_sliding_window: bool. Center that window on the query
            instead: `sliding_window_size // 2` keys after it and the rest
            before it (bidirectional attention, e.g. EmbeddingGemma).
        use_alibi: bool. Add ALiBi's linear position bias to the logits.
        scale_alibi: bool. Scale the ALiBi bias by the query scale too, as
            when the bias is added before the logits are scaled (Falcon).
        zero_unattended_queries: bool. Output zeros for queries that
            `attention_mask` lets attend to no key (e.g. left padding)
            instead of an average of all values, like attentions built on
            `keras.layers.Softmax`. The sliding window is not consulted, as
            in keras-hub's Gemma.
        logit_soft_cap: float or `None`. Logits become
            `cap * tanh(logits / cap)`.
        query_scale: float or `None`. Factor on the queries; `None` means
            `head_dim ** -0.5`.
        dropout: float. Dropout on the attention probabilities.
        kernel_initializer: initializer of the projection kernels.
        sublayer_names: optional dict overriding the names of the
            projections (`query`, `key`, `value`, `output`) and norms
            (`query_norm`, `key_norm`), which are the variable paths.
        key_value_input_dim: int or `None`. Keyword-only. Width of the
            inputs the key and value projections read, when it differs
            from the queries' (cross-attention over an encoder of another
            width, T5Gemma 9B-2B); `None` means the queries' width.
            Defaults to `None`.
        use_sinks: bool. A learned logit per query head, the variable
            `sinks` `(num_query_heads,)`, joins each query's softmax
            denominator as a key without a value (GPT-OSS's attention
            sinks): a query may put part, or with every key masked all,
            of its weight nowhere. Defaults to `False`.
        gated_query: bool. Keyword-only. The query kernel makes `2 *
            head_dim` features per head: the query, then a gate; each
            head's output is multiplied by `sigmoid(gate)` before the
            output projection (Qwen 3.5's full attention). Defaults to
            `False`.
        rotary_dim: int or `None`. Keyword-only. RoPE turns only the first
            `rotary_dim` features of each query and key head (partial
            RoPE, Qwen 3.5); even, at most `head_dim`. `None` turns them
            all. Defaults to `None`.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(batch, seq, hidden)`.
        attention_mask: optional boolean `(batch, seq, key_len)`, `True`
            where a query may attend a key; see `decoder_attention_mask`.
        key_value_inputs: optional `(batch, key_len, hidden)`: keys and
            values are projected from these instead of `inputs`
            (cross-attention over an encoder's outputs). Not with a
            `cache` or a rotary embedding.
        key_value_cache: optional `(batch, 2, key_len, num_key_value_heads,
            head_dim)`, the keys and values `key_value_cache()` computed
            from an encoder's outputs, read as they are (cross-attention
            while decoding step by step). Instead of `key_value_inputs`.
        cache: optional `(batch, 2, max_len, num_key_value_heads, head_dim)`
            keys and values of earlier steps. When given, the call returns
            `(outputs, updated_cache)` and `key_len` is `max_len`.
        cache_update_index: int or scalar tensor, the position of the first
            input token; where its keys and values are written.
        positions: optional int `(batch, seq)` positions of the tokens for
            the rotary embedding, when they differ from their indices in
            the sequence (left-padded prompts count from their first real
            token). Sliding windows and ALiBi use index distances, which
            padding on the left shifts alike for queries and keys.
        training: bool. Enables dropout.

    Returns:
        `(batch, seq, hidden)`, or `(outputs, cache)` when a cache is given.

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers import CachedGroupedQueryAttention
    from keras_nlp.layers import RotaryEmbedding

    attention = CachedGroupedQueryAttention(
        num_query_heads=4,
        num_key_value_heads=2,
        rotary_embedding=RotaryEmbedding(),
    )
    x = np.random.rand(2, 6, 32).astype("float32")
    attention(x).shape  # (2, 6, 32)

    # Decode one token at a time into a cache of 8 positions.
    cache = np.zeros((2, 2, 8, 2, 8), "float32")
    step, cache = attention(x[:, :1], cache=cache, cache_update_index=0)
    ```
    """

    layer_arguments = ("rotary_embedding",)

    def __init__(
        self,
        num_query_heads,
        num_key_value_heads,
        head_dim=None,
        rotary_embedding=None,
        use_query_key_norm=False,
        zero_centered_query_key_norm=False,
        layer_norm_epsilon=1e-6,
        use_bias=False,
        use_output_bias=False,
        flat_output_kernel=False,
        heads_first=False,
        sliding_window_size=None,
        centered_sliding_window=False,
        use_alibi=False,
        scale_alibi=False,
        zero_unattended_queries=False,
        logit_soft_cap=None,
        query_scale=None,
        dropout=0.0,
        kernel_initializer="glorot_uniform",
        sublayer_names=None,
        use_key_bias=None,
        use_sinks=False,
        *,
        key_value_input_dim=None,
        gated_query=False,
        rotary_dim=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (
            ("num_query_heads", num_query_heads),
            ("num_key_value_heads", num_key_value_heads),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"`{name}` must be a positive integer. Received: "
                    f"{name}={value!r}."
                )
        if num_query_heads % num_key_value_heads:
            raise ValueError(
                "`num_key_value_heads` must divide `num_query_heads`. "
                f"Received: num_query_heads={num_query_heads}, "
                f"num_key_value_heads={num_key_value_heads}."
            )
        check_sublayer_keys(sublayer_names, DEFAULT_SUBLAYER_NAMES)
        if rotary_dim is not None and (
            rotary_embedding is None
            or not isinstance(rotary_dim, int)
            or rotary_dim < 0
            or rotary_dim % 2
        ):
            raise ValueError(
                "`rotary_dim` must be an even number of features, at most "
                "`head_dim`, with a `rotary_embedding`. Received: "
                f"rotary_dim={rotary_dim!r}, head_dim={head_dim!r}, "
                f"rotary_embedding={rotary_embedding!r}."
            )
        self.num_query_heads = num_query_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = head_dim
        self.rotary_embedding = rotary_embedding
        self.use_query_key_norm = use_query_key_norm
        self.zero_centered_query_key_norm = zero_centered_query_key_norm
        self.layer_norm_epsilon = layer_norm_epsilon
        self.use_bias = use_bias
        self.use_output_bias = use_output_bias
        self.use_key_bias = use_key_bias
        self.flat_output_kernel = flat_output_kernel
        self.heads_first = heads_first
        self.sliding_window_size = sliding_window_size
        self.centered_sliding_window = centered_sliding_window
        self.use_alibi = use_alibi
        self.scale_alibi = scale_alibi
        self.zero_unattended_queries = zero_unattended_queries
        self.logit_soft_cap = logit_soft_cap
        self.query_scale = query_scale
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.sublayer_names = dict(sublayer_names or {})
        self.use_sinks = use_sinks
        self.key_value_input_dim = key_value_input_dim
        self.gated_query = gated_query
        self.rotary_dim = rotary_dim
        self._names = {**DEFAULT_SUBLAYER_NAMES, **self.sublayer_names}
        declare_dims(self, sinks=("heads",))

    def _new_kernel_initializer(self):
        # An unseeded Keras initializer fixes its seed when created and then
        # draws the same values on every call: give each kernel a copy.
        return self.kernel_initializer.__class__.from_config(
            self.kernel_initializer.get_config()
        )

    def _projection(self, equation, heads, bias_axes, name):
        use_bias = self.use_bias
        if name == "key" and self.use_key_bias is not None:
            use_bias = self.use_key_bias
        width = self._head_dim
        if name == "query" and self.gated_query:
            width *= 2
        dense = keras.layers.EinsumDense(
            equation,
            output_shape=(None, heads, width),
            bias_axes=bias_axes if use_bias else None,
            kernel_initializer=self._new_kernel_initializer(),
            dtype=self.dtype_policy,
            name=self._names[name],
        )
        return declare_einsum_dims(dense, **LEGEND)

    def _norm(self, name):
        norm = keras.layers.RMSNormalization
        if self.zero_centered_query_key_norm:
            norm = ZeroCenteredRMSNormalization
        return norm(
            epsilon=self.layer_norm_epsilon,
            dtype=self.dtype_policy,
            name=self._names[name],
        )

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        self._head_dim = self.head_dim or hidden_dim // self.num_query_heads
        if self.rotary_dim is not None and self.rotary_dim > self._head_dim:
            raise ValueError(
                f"`rotary_dim` ({self.rotary_dim}) must be at most the head "
                f"size, {self._head_dim}."
            )
        layout = "heads_first_" if self.heads_first else ""
        self.query_dense = self._projection(
            EQUATIONS[layout + "query"], self.num_query_heads, "nh", "query"
        )
        self.query_dense.build(input_shape)
        key_value_shape = input_shape
        if self.key_value_input_dim is not None:
            key_value_shape = (*input_shape[:-1], self.key_value_input_dim)
        self.key_dense = self._projection(
            EQUATIONS[layout + "key"], self.num_key_value_heads, "kh", "key"
        )
        self.key_dense.build(key_value_shape)
        self.value_dense = self._projection(
            EQUATIONS[layout + "value"],
            self.num_key_value_heads,
            "kh",
            "value",
        )
        self.value_dense.build(key_value_shape)

        heads_shape = (None, None, self.num_query_heads, self._head_dim)
        if self.flat_output_kernel:
            equation = EQUATIONS["flat_output"]
            output_input_shape = (
                None,
                None,
                self.num_query_heads * self._head_dim,
            )
        else:
            equation = EQUATIONS["output"]
            output_input_shape = heads_shape
        self.output_dense = keras.layers.EinsumDense(
            equation,
            output_shape=(None, hidden_dim),
            bias_axes="d" if self.use_output_bias else None,
            kernel_initializer=self._new_kernel_initializer(),
            dtype=self.dtype_policy,
            name=self._names["output"],
        )
        declare_einsum_dims(self.output_dense, **LEGEND)
        self.output_dense.build(output_input_shape)

        if self.use_query_key_norm:
            self.query_norm = self._norm("query_norm")
            self.query_norm.build(heads_shape)
            self.key_norm = self._norm("key_norm")
            self.key_norm.build(heads_shape)
        self.sinks = None
        if self.use_sinks:
            self.sinks = self.add_weight(
                shape=(self.num_query_heads,),
                initializer=self._new_kernel_initializer(),
                dtype=self.variable_dtype,
                name="sinks",
            )
        self.probabilities_dropout = keras.layers.Dropout(
            rate=self.dropout, dtype=self.dtype_policy, name="dropout"
        )

    def cache_shape(self, batch_size, max_length):
        """The shape of this layer's key/value cache (built layers only)."""
        return (
            batch_size,
            2,
            max_length,
            self.num_key_value_heads,
            self._head_dim,
        )

    def cache_kernel(self):
        """`(layer, kv_heads letter, head_dim letter)` whose kernel's layout
        the key/value cache follows: the key projection's."""
        return self.key_dense, "k", "h"

    def key_value_cache(self, key_value_inputs):
        """The keys and values of `key_value_inputs` (cross-attention), for
        `call(..., key_value_cache=...)`: computed once per source, then
        read by every decoding step.

        Args:
            key_value_inputs: `(batch, source_len, hidden)`.

        Returns:
            `(batch, 2, source_len, kv_heads, head_dim)`.
        """
        key = self.key_dense(key_value_inputs)
        if self.use_query_key_norm:
            key = self.key_norm(key)
        value = self.value_dense(key_value_inputs)
        return ops.stack((key, value), axis=1)

    def _mask_and_bias(self, attention_mask, query, key, start_index):
        """The boolean mask the softmax reads and the position bias.

        The caller's `attention_mask` (if any) and the layer's own
        position mask (sliding window, chunks) both hold; either may be
        `None`, and so may the result.
        """
        window, bias = self._position_mask_and_bias(
            ops.shape(query)[1], ops.shape(key)[1], start_index
        )
        return both_masks(attention_mask, window), bias

    def _position_mask_and_bias(self, query_length, key_length, start_index):
        """Sliding-window mask `(1, q, k)` and ALiBi bias `(1, N, q, k)`."""
        if self.sliding_window_size is None and not self.use_alibi:
            return None, None
        distance = query_key_distance(query_length, key_length, start_index)
        window = None
        if self.sliding_window_size is not None:
            window = window_mask(
                distance, self.sliding_window_size, self.centered_sliding_window
            )
        bias = None
        if self.use_alibi:
            slopes = alibi_slopes(self.num_query_heads)
            if self.scale_alibi:
                scale = self.query_scale
                if scale is None:
                    scale = self._head_dim**-0.5
                slopes = [slope * scale for slope in slopes]
            slopes = ops.convert_to_tensor(slopes, "float32")
            bias = -slopes[:, None, None] * ops.cast(distance, "float32")
            bias = ops.cast(bias[None], self.compute_dtype)
        return window, bias

    def call(
        self,
        inputs,
        attention_mask=None,
        cache=None,
        cache_update_index=None,
        training=None,
        key_value_inputs=None,
        positions=None,
        key_value_cache=None,
    ):
        cross = key_value_inputs is not None or key_value_cache is not None
        if cross and (cache is not None or self.rotary_embedding is not None):
            raise ValueError(
                "`key_value_inputs` and `key_value_cache` (cross-attention) "
                "take no `cache` and no rotary embedding: keys would sit "
                "at other positions than queries."
            )
        if cache is None and cache_update_index is not None:
            raise ValueError(
                "`cache_update_index` is only meaningful with a `cache`. "
                f"Received: cache=None, cache_update_index="
                f"{cache_update_index!r}."
            )
        start_index = 0 if cache_update_index is None else cache_update_index

        if key_value_cache is not None:
            # Keys and values of `key_value_cache()`, normalized already.
            query = self.query_dense(inputs)
            key, value = key_value_cache[:, 0], key_value_cache[:, 1]
        elif key_value_inputs is None:
            # Self-attention: one matmul for q, k and v where sharded.
            query, key, value = project_together(
                inputs, [self.query_dense, self.key_dense, self.value_dense]
            )
        else:
            query = self.query_dense(inputs)
            key = self.key_dense(key_value_inputs)
            value = self.value_dense(key_value_inputs)
        gate = None
        if self.gated_query:
            query, gate = (
                query[..., : self._head_dim],
                query[..., self._head_dim :],
            )
        if self.use_query_key_norm:
            query = self.query_norm(query)
            if key_value_cache is None:
                key = self.key_norm(key)
        if self.rotary_embedding is not None:
            rotary_dim = self.rotary_dim
            if rotary_dim is None:
                rotary_dim = self._head_dim
            query, key = (
                rotate_leading(
                    self.rotary_embedding,
                    x,
                    rotary_dim,
                    start_index=start_index,
                    positions=positions,
                )
                for x in (query, key)
            )
        # Context parallelism: keys and values gathered over the sequence.
        key = pin_activation(self, "keys", key)
        value = pin_activation(self, "keys", value)
        if cache is not None:
            key, value, cache = write_cache(cache, key, value, start_index)

        mask, bias = self._mask_and_bias(
            attention_mask, query, key, start_index
        )

        scale = self.query_scale
        if scale is None:
            scale = self._head_dim**-0.5
        query = query * ops.cast(scale, query.dtype)
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
            bias=bias,
            sinks=self.sinks,
        )
        if self.zero_unattended_queries and attention_mask is not None:
            attends = ops.cast(attention_mask, "bool")
            has_keys = ops.any(attends, axis=-1)[:, :, None, None]
            outputs = ops.where(has_keys, outputs, ops.zeros_like(outputs))
        if gate is not None:
            outputs = outputs * ops.sigmoid(gate)
        if self.flat_output_kernel:
            batch, length = ops.shape(outputs)[0], ops.shape(outputs)[1]
            outputs = ops.reshape(
                outputs,
                (batch, length, self.num_query_heads * self._head_dim),
            )
        outputs = self.output_dense(pin_input(self.output_dense, outputs))
        return outputs if cache is None else (outputs, cache)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_query_heads": self.num_query_heads,
                "num_key_value_heads": self.num_key_value_heads,
                "head_dim": self.head_dim,
                # `serialize_keras_object(None)` is None.
                "rotary_embedding": keras.saving.serialize_keras_object(
                    self.rotary_embedding
                ),
                "use_query_key_norm": self.use_query_key_norm,
                "zero_centered_query_key_norm": (
                    self.zero_centered_query_key_norm
                ),
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "use_bias": self.use_bias,
                "use_output_bias": self.use_output_bias,
                "use_key_bias": self.use_key_bias,
                "flat_output_kernel": self.flat_output_kernel,
                "heads_first": self.heads_first,
                "sliding_window_size": self.sliding_window_size,
                "centered_sliding_window": self.centered_sliding_window,
                "use_alibi": self.use_alibi,
                "scale_alibi": self.scale_alibi,
                "zero_unattended_queries": self.zero_unattended_queries,
                "logit_soft_cap": self.logit_soft_cap,
                "query_scale": self.query_scale,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "sublayer_names": self.sublayer_names,
                "use_sinks": self.use_sinks,
            }
        )
        # Only when set, so the configs of existing models read as before.
        if self.key_value_input_dim is not None:
            config["key_value_input_dim"] = self.key_value_input_dim
        if self.gated_query:
            config["gated_query"] = True
        if self.rotary_dim is not None:
            config["rotary_dim"] = self.rotary_dim
        return config
