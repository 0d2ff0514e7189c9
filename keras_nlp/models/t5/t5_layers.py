"""T5's layers: a scale-only RMS norm, attention with a learned relative
position bias, and the pre-norm encoder or decoder block.

The checkpoints' projections are flat `Dense` kernels without biases:
`(hidden, heads * key_value_dim)` in, `(heads * key_value_dim, hidden)`
out. Their concatenated-heads dimension is named `heads`, as for the flat
output kernel of the shared attention.
"""

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.distribution.dims import declare_flat_heads
from keras_nlp.layers.decoder_block import FEEDFORWARD_INPUT_DIMS
from keras_nlp.layers.decoder_block import FEEDFORWARD_OUTPUT_DIMS
from keras_nlp.layers.decoder_block import get_activation
from keras_nlp.layers.dense import named_dense

PROJECTION_DIMS = ("hidden", "heads")
OUTPUT_PROJECTION_DIMS = ("heads", "hidden")
# The learned bias: one value per relative-distance bucket and head.
RELATIVE_BIAS_DIMS = ("buckets", "heads")
NUM_BUCKETS = 32
MAX_DISTANCE = 128
# Added to the scores of keys a query may not see.
MASKED_SCORE = -1e9


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class T5LayerNorm(keras.layers.Layer):
    """T5's norm: divides by the root mean square and scales; no mean is
    subtracted and there is no bias.

    Args:
        epsilon: float. Added to the mean square. Defaults to `1e-6`.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.t5.t5_layers import T5LayerNorm

    norm = T5LayerNorm(name="t5_layer_norm")
    norm(np.ones((2, 3, 8), "float32")).shape  # (2, 3, 8)
    norm.weight.path  # "t5_layer_norm/weight"
    ```
    """

    def __init__(self, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def build(self, input_shape):
        # The checkpoints call the scale `weight`.
        self.weight = self.add_weight(
            name="weight", shape=(input_shape[-1],), initializer="ones"
        )

    def call(self, x):
        mean_square = ops.mean(ops.square(x), axis=-1, keepdims=True)
        return self.weight * (x * ops.rsqrt(mean_square + self.epsilon))

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}


def relative_position_buckets(
    query_length, key_length, bidirectional, query_start=0
):
    """`(query_length, key_length)` int32 buckets of `key - query` offsets.

    Query `t` sits at position `query_start + t` (cached decoding decodes
    a slice of the sequence), keys at `0 .. key_length - 1`.

    Half the buckets (of each direction, when bidirectional) hold exact
    small distances; the rest grow logarithmically up to `MAX_DISTANCE`,
    beyond which every distance shares the last bucket. A causal decoder
    (`bidirectional=False`) only tells apart keys at or before the query.
    """
    queries = ops.arange(query_length) + ops.cast(query_start, "int32")
    offset = ops.arange(key_length)[None, :] - queries[:, None]
    buckets = NUM_BUCKETS
    first = 0
    if bidirectional:
        buckets //= 2
        first = ops.cast(offset > 0, offset.dtype) * buckets
        distance = ops.abs(offset)
    else:
        distance = -ops.minimum(offset, 0)
    exact = buckets // 2
    # Distance 0 makes the log -inf; `where` keeps the exact bucket there.
    scaled = (
        ops.log(ops.cast(distance, "float32") / ops.cast(exact, "float32"))
        / ops.cast(ops.log(MAX_DISTANCE / exact), "float32")
        * (buckets - exact)
    )
    logarithmic = ops.minimum(
        exact + ops.cast(scaled, distance.dtype), buckets - 1
    )
    return first + ops.where(distance < exact, distance, logarithmic)


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class T5Attention(keras.layers.Layer):
    """Multi-head attention with T5's relative position bias, unscaled.

    Scores are `query . key` (the `1/sqrt(key_value_dim)` is folded into
    the trained weights) plus a bias `(batch or 1, heads, queries, keys)`.
    The first self-attention layer of a stack owns the bias table
    `(NUM_BUCKETS, heads)`, computes the bias with the mask folded in as
    `MASKED_SCORE`, and returns it; the stack's later layers receive it
    as `position_bias`. Cross-attention has no table: its bias is the
    mask alone.

    Args:
        num_heads: int. Attention heads.
        key_value_dim: int. Width of each head.
        hidden_dim: int. Width of the output.
        is_decoder: bool. Causal buckets (keys at or before the query)
            instead of bidirectional ones.
        use_relative_attention_bias: bool. Own the bias table.
        dropout: float. Dropout on the attention probabilities.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`).

    Call arguments:
        x: `(batch, queries, hidden)`.
        attention_mask: optional `(batch, 1 or queries, keys)`, non-zero
            where a query may see a key; ignored when `position_bias` is
            given.
        key_value: optional `(batch, keys, hidden)` to attend to (cross-
            attention); defaults to `x`.
        position_bias: optional bias from the stack's first layer.
        training: bool. Enables dropout.
        cache: optional `(batch, 2, max_len, heads, key_value_dim)` keys
            and values, for cached decoding. With `cache_update_index`,
            the queries' own keys and values are written from that slot
            on (self-attention); without, the cache is read as it is
            (a cross-attention's precomputed keys and values).
        cache_update_index: int or scalar tensor, the slot of the first
            query (with a cache).

    Returns:
        `(output (batch, queries, hidden_dim), position_bias)`, and the
        cache last when one is given.
    """

    def __init__(
        self,
        num_heads,
        key_value_dim,
        hidden_dim,
        is_decoder,
        use_relative_attention_bias=False,
        dropout=0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.key_value_dim = key_value_dim
        self.hidden_dim = hidden_dim
        self.is_decoder = is_decoder
        self.use_relative_attention_bias = use_relative_attention_bias
        self.dropout = dropout
        inner_dim = num_heads * key_value_dim

        def projection(width, dims, stddev, name):
            return named_dense(
                width,
                dims,
                use_bias=False,
                kernel_initializer=keras.initializers.RandomNormal(
                    stddev=stddev
                ),
                dtype=self.dtype_policy,
                name=name,
            )

        self.query_projector = projection(
            inner_dim,
            PROJECTION_DIMS,
            (inner_dim * key_value_dim) ** -0.5,
            "query_projector",
        )
        self.key_projector = projection(
            inner_dim, PROJECTION_DIMS, inner_dim**-0.5, "key_projector"
        )
        self.value_projector = projection(
            inner_dim, PROJECTION_DIMS, inner_dim**-0.5, "value_projector"
        )
        self.output_projector = projection(
            hidden_dim,
            OUTPUT_PROJECTION_DIMS,
            inner_dim**-0.5,
            "output_projector",
        )
        # Split only between heads where the projections make them (the
        # output projection's rows are contracted: any split is exact).
        heads = ((num_heads, key_value_dim),)
        for projector in (
            self.query_projector,
            self.key_projector,
            self.value_projector,
        ):
            declare_flat_heads(projector, "kernel", heads=heads)
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy
        )
        self.relative_attention_bias = None
        if use_relative_attention_bias:
            # Made here, outside the block's name scope, as keras-hub makes
            # it: the path is `self_attention/embeddings` in the encoder
            # and in the decoder alike, which its checkpoints require.
            self.relative_attention_bias = self.add_weight(
                name="embeddings",
                shape=(NUM_BUCKETS, num_heads),
                initializer=keras.initializers.RandomNormal(
                    stddev=inner_dim**-0.5
                ),
            )
            declare_dims(self, embeddings=RELATIVE_BIAS_DIMS)

    def build(self, input_shape, key_value_shape=None):
        key_value_shape = key_value_shape or input_shape
        inner = (*input_shape[:-1], self.num_heads * self.key_value_dim)
        self.query_projector.build(input_shape)
        self.key_projector.build(key_value_shape)
        self.value_projector.build(key_value_shape)
        self.output_projector.build(inner)

    def _heads(self, x):
        shape = ops.shape(x)
        return ops.reshape(
            x, (shape[0], shape[1], self.num_heads, self.key_value_dim)
        )

    def cache_shape(self, batch_size, max_length):
        """The shape of this layer's key/value cache."""
        return (batch_size, 2, max_length, self.num_heads, self.key_value_dim)

    def cache_kernel(self):
        """`(layer, heads letter, head_dim letter)` whose kernel's layout
        the cache follows: the flat key projection `(hidden, heads)`,
        whose heads dimension holds whole heads where it is sharded."""
        return self.key_projector, "k", None

    def key_value_cache(self, key_value):
        """`(batch, 2, keys, heads, key_value_dim)` keys and values of
        `key_value` `(batch, keys, hidden)`: a cross-attention's, once."""
        key = self._heads(self.key_projector(key_value))
        value = self._heads(self.value_projector(key_value))
        return ops.stack((key, value), axis=1)

    def call(
        self,
        x,
        attention_mask=None,
        key_value=None,
        position_bias=None,
        training=None,
        cache=None,
        cache_update_index=None,
    ):
        key_value = x if key_value is None else key_value
        query = self._heads(self.query_projector(x))
        if cache is not None and cache_update_index is None:
            key, value = cache[:, 0], cache[:, 1]
        else:
            key = self._heads(self.key_projector(key_value))
            value = self._heads(self.value_projector(key_value))
        query_start = 0
        if cache is not None and cache_update_index is not None:
            query_start = cache_update_index
            start = [0, cache_update_index, 0, 0]
            key = ops.slice_update(cache[:, 0], start, key)
            value = ops.slice_update(cache[:, 1], start, value)
            cache = ops.stack((key, value), axis=1)
        scores = ops.einsum("bqnd,bknd->bnqk", query, key)
        if position_bias is None:
            query_length, key_length = ops.shape(x)[1], ops.shape(key)[1]
            if self.relative_attention_bias is None:
                position_bias = ops.zeros(
                    (1, self.num_heads, query_length, key_length),
                    self.compute_dtype,
                )
            else:
                buckets = relative_position_buckets(
                    query_length,
                    key_length,
                    not self.is_decoder,
                    query_start=query_start,
                )
                # (queries, keys, heads) -> (1, heads, queries, keys).
                table = ops.take(self.relative_attention_bias, buckets, axis=0)
                position_bias = ops.transpose(table, (2, 0, 1))[None]
            if attention_mask is not None:
                mask = attention_mask[:, None]
                hidden = 1.0 - ops.cast(mask, position_bias.dtype)
                position_bias = position_bias + hidden * MASKED_SCORE
        scores = scores + ops.cast(position_bias, scores.dtype)
        weights = self.dropout_layer(
            ops.softmax(scores, axis=-1), training=training
        )
        heads = ops.einsum("bnqk,bknd->bqnd", weights, value)
        shape = ops.shape(heads)
        flat = ops.reshape(heads, (shape[0], shape[1], -1))
        outputs = self.output_projector(flat)
        if cache is None:
            return outputs, position_bias
        return outputs, position_bias, cache

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "key_value_dim": self.key_value_dim,
            "hidden_dim": self.hidden_dim,
            "is_decoder": self.is_decoder,
            "use_relative_attention_bias": self.use_relative_attention_bias,
            "dropout": self.dropout,
        }


def causal_mask(x, padding_mask=None):
    """`(batch, seq, seq)` bool: each query sees the keys up to it (the
    real ones, with a `(batch, 1, seq)` padding mask)."""
    shape = ops.shape(x)
    positions = ops.arange(shape[1])
    mask = positions[:, None] >= positions[None, :]
    mask = ops.broadcast_to(mask[None], (shape[0], shape[1], shape[1]))
    if padding_mask is None:
        return mask
    return ops.logical_and(mask, ops.cast(padding_mask, "bool"))


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class T5Block(keras.layers.Layer):
    """One pre-norm T5 layer of the encoder or the decoder.

        h = x + dropout(self_attention(norm(x)))
        h = h + dropout(cross_attention(norm(h), encoder))   # decoder
        y = h + dropout(output(dropout(ffw(norm(h)))))

    where `ffw(z)` is `act(input(z))`, or `act(input(z)) * gate(z)` when
    gated. No projection has a bias.

    Args:
        num_heads, key_value_dim, hidden_dim, intermediate_dim: sizes.
        is_decoder: bool. Causal relative buckets and a cross-attention.
        activation: str. The feed-forward activation.
        use_gated_activation: bool. Multiply by a linear gate.
        layer_norm_epsilon: float. Epsilon of every norm.
        dropout: float. Dropout rate in training.
        use_relative_attention_bias: bool. This (first) layer owns the
            stack's relative position bias table.
        norm_names: names of the norms in call order (self-attention,
            cross-attention in the decoder, feed-forward): their paths.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`).

    Call arguments:
        x: `(batch, seq, hidden)`.
        attention_mask: `(batch, 1 or seq, seq)` for the self-attention;
            the decoder's first layer makes it causal.
        position_bias: the stack's bias, from its first layer.
        encoder_output: `(batch, source, hidden)`, decoder only.
        encoder_mask: `(batch, 1, source)`, decoder only.
        training: bool. Enables dropout.
        self_attention_cache: optional `(batch, 2, max_len, heads,
            key_value_dim)`, for cached decoding (decoder only): the
            tokens' keys and values are written from slot
            `cache_update_index` on, and `attention_mask` must then be
            the whole `(batch, seq, max_len)` causal mask.
        cache_update_index: int or scalar tensor, the slot of the first
            token.
        cross_attention_cache: optional precomputed keys and values of
            the encoder's output (`cross_attention_cache(...)`), read
            instead of `encoder_output`.

    Returns:
        `(y, position_bias)`, and the updated self-attention cache last
        when one is given.
    """

    def __init__(
        self,
        num_heads,
        key_value_dim,
        hidden_dim,
        intermediate_dim,
        is_decoder,
        activation="relu",
        use_gated_activation=False,
        layer_norm_epsilon=1e-6,
        dropout=0.0,
        use_relative_attention_bias=False,
        norm_names=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.key_value_dim = key_value_dim
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.is_decoder = is_decoder
        self.activation = activation
        self.use_gated_activation = use_gated_activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = dropout
        self.use_relative_attention_bias = use_relative_attention_bias
        count = 3 if is_decoder else 2
        self.norm_names = list(norm_names or [None] * count)

        def norm(name):
            return T5LayerNorm(
                layer_norm_epsilon, dtype=self.dtype_policy, name=name
            )

        def drop():
            return keras.layers.Dropout(dropout, dtype=self.dtype_policy)

        def attention(name, use_bias):
            return T5Attention(
                num_heads,
                key_value_dim,
                hidden_dim,
                is_decoder,
                use_relative_attention_bias=use_bias,
                dropout=dropout,
                dtype=self.dtype_policy,
                name=name,
            )

        names = iter(self.norm_names)
        # Attribute names and creation order as keras-hub's layer: they
        # order its weights and key its saved groups.
        self.self_attention = attention(
            "self_attention", use_relative_attention_bias
        )
        self.self_attention_layer_norm = norm(next(names))
        self.self_attention_dropout = drop()
        if is_decoder:
            self.cross_attention = attention("cross_attention", False)
            self.cross_attention_layer_norm = norm(next(names))
            self.cross_attention_dropout = drop()

        def dense(width, dims, fan_in, name, act=None):
            return named_dense(
                width,
                dims,
                use_bias=False,
                activation=act,
                kernel_initializer=keras.initializers.RandomNormal(
                    stddev=fan_in**-0.5
                ),
                dtype=self.dtype_policy,
                name=name,
            )

        self.input_projector = dense(
            intermediate_dim,
            FEEDFORWARD_INPUT_DIMS,
            hidden_dim,
            "input_projector",
            act=get_activation(activation),
        )
        if use_gated_activation:
            self.gate_projector = dense(
                intermediate_dim,
                FEEDFORWARD_INPUT_DIMS,
                hidden_dim,
                "gate_projector",
            )
        self.output_projector = dense(
            hidden_dim,
            FEEDFORWARD_OUTPUT_DIMS,
            intermediate_dim,
            "output_projector",
        )
        self.layer_norm = norm(next(names))
        self.dropout_layer = drop()

    def build(self, input_shape):
        self.self_attention.build(input_shape)
        self.self_attention_layer_norm.build(input_shape)
        if self.is_decoder:
            # The encoder output has the decoder's width.
            self.cross_attention.build(input_shape)
            self.cross_attention_layer_norm.build(input_shape)
        self.input_projector.build(input_shape)
        if self.use_gated_activation:
            self.gate_projector.build(input_shape)
        inner = (*input_shape[:-1], self.intermediate_dim)
        self.output_projector.build(inner)
        self.layer_norm.build(input_shape)

    def call(
        self,
        x,
        attention_mask=None,
        position_bias=None,
        encoder_output=None,
        encoder_mask=None,
        training=None,
        self_attention_cache=None,
        cache_update_index=None,
        cross_attention_cache=None,
    ):
        cached = self_attention_cache is not None
        if self.is_decoder and position_bias is None and not cached:
            # Only the first layer builds the bias, and folds the mask in.
            attention_mask = causal_mask(x, attention_mask)
        attended = self.self_attention(
            self.self_attention_layer_norm(x),
            attention_mask=attention_mask,
            position_bias=position_bias,
            training=training,
            cache=self_attention_cache,
            cache_update_index=cache_update_index if cached else None,
        )
        updated_cache = attended[2] if cached else None
        attended, position_bias = attended[:2]
        x = x + self.self_attention_dropout(attended, training=training)
        if self.is_decoder:
            attended = self.cross_attention(
                self.cross_attention_layer_norm(x),
                attention_mask=encoder_mask,
                key_value=encoder_output,
                training=training,
                cache=cross_attention_cache,
            )[0]
            x = x + self.cross_attention_dropout(attended, training=training)
        h = self.layer_norm(x)
        fed = self.input_projector(h)
        if self.use_gated_activation:
            fed = fed * self.gate_projector(h)
        fed = self.dropout_layer(fed, training=training)
        fed = self.dropout_layer(self.output_projector(fed), training=training)
        if cached:
            return x + fed, position_bias, updated_cache
        return x + fed, position_bias

    def cross_attention_cache(self, encoder_output):
        """The cross-attention's keys and values of the encoder's output
        `(batch, source, hidden)`: `(batch, 2, source, heads,
        key_value_dim)`, computed once for every decoding step."""
        return self.cross_attention.key_value_cache(encoder_output)

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "key_value_dim": self.key_value_dim,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "is_decoder": self.is_decoder,
            "activation": self.activation,
            "use_gated_activation": self.use_gated_activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "dropout": self.dropout,
            "use_relative_attention_bias": self.use_relative_attention_bias,
            "norm_names": self.norm_names,
        }
