"""Qwen 3.5's full attention: gated grouped-query attention, partial RoPE."""

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.distribution.dims import declare_einsum_dims
from keras_nlp.distribution.layout_map import pin_activation
from keras_nlp.distribution.layout_map import pin_input
from keras_nlp.layers.cached_attention import EQUATIONS
from keras_nlp.layers.cached_attention import LEGEND
from keras_nlp.layers.cached_attention import both_masks
from keras_nlp.layers.cached_attention import query_key_distance
from keras_nlp.layers.cached_attention import window_mask
from keras_nlp.layers.cached_attention import write_cache
from keras_nlp.layers.common import check_positive_ints
from keras_nlp.layers.dense import fresh_initializer
from keras_nlp.layers.grouped_query_attention import grouped_query_attention
from keras_nlp.layers.rotary_embedding import RotaryEmbedding
from keras_nlp.layers.rotary_embedding import rotate_leading
from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)

# The norms' scales are `(head_dim,)`, shared by every head.
NORM_DIMS = ("head_dim",)


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class Qwen3_5Attention(keras.layers.Layer):
    """Grouped-query attention whose output is gated per feature.

    The query kernel `(hidden, heads, 2 * head_dim)` gives each head its
    query (first half) and a gate (second half); the attention output is
    multiplied by `sigmoid(gate)` before the output projection. Query and
    key heads are RMS-normalized with `1 + scale` gains and RoPE turns the
    first `int(head_dim * partial_rotary_factor)` features of each. Paths
    and shapes are keras-hub's `Qwen3_5Attention`'s: `query/kernel`,
    `key/kernel`, `value/kernel` `(hidden, kv_heads, head_dim)`,
    `attention_output/kernel` `(heads, head_dim, hidden)`,
    `query_norm/scale` and `key_norm/scale` `(head_dim,)`.

    Args:
        num_query_heads: int.
        num_key_value_heads: int; divides `num_query_heads`.
        head_dim: int.
        partial_rotary_factor: float in `(0, 1]`. Defaults to `0.25`.
        rope_max_wavelength: float. Defaults to `10000`.
        rope_scaling_factor: float. Defaults to `1.0`.
        layer_norm_epsilon: float. Epsilon of the query/key norms.
        sliding_window_size: int or `None`: a query at `i` sees keys `j`
            with `i - j < sliding_window_size`. Defaults to `None`.
        dropout: float. Dropout on the attention probabilities.
        kernel_initializer: initializer of the kernels.
        **kwargs: forwarded to `keras.layers.Layer`.

    Call arguments: as `keras_nlp.layers.CachedGroupedQueryAttention`'s
    (`inputs`, `attention_mask`, `cache`, `cache_update_index`,
    `positions`, `training`).
    """

    def __init__(
        self,
        num_query_heads,
        num_key_value_heads,
        head_dim,
        partial_rotary_factor=0.25,
        rope_max_wavelength=10000,
        rope_scaling_factor=1.0,
        layer_norm_epsilon=1e-6,
        sliding_window_size=None,
        dropout=0.0,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_ints(
            num_query_heads=num_query_heads,
            num_key_value_heads=num_key_value_heads,
            head_dim=head_dim,
        )
        if num_query_heads % num_key_value_heads:
            raise ValueError(
                "`num_key_value_heads` must divide `num_query_heads`. "
                f"Received: num_query_heads={num_query_heads}, "
                f"num_key_value_heads={num_key_value_heads}."
            )
        rotary_dim = int(head_dim * partial_rotary_factor)
        if not 0 < partial_rotary_factor <= 1 or rotary_dim % 2:
            raise ValueError(
                "`partial_rotary_factor` must be in (0, 1] and turn an even "
                "number of features, int(head_dim * partial_rotary_factor)."
                f" Received: partial_rotary_factor={partial_rotary_factor!r}"
                f" with head_dim={head_dim} ({rotary_dim} features)."
            )
        self.num_query_heads = num_query_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = head_dim
        self.partial_rotary_factor = partial_rotary_factor
        self.rope_max_wavelength = rope_max_wavelength
        self.rope_scaling_factor = rope_scaling_factor
        self.layer_norm_epsilon = layer_norm_epsilon
        self.sliding_window_size = sliding_window_size
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.rotary_dim = rotary_dim

        def projection(kind, heads, width, name):
            dense = keras.layers.EinsumDense(
                EQUATIONS[kind],
                output_shape=(None, heads, width),
                kernel_initializer=fresh_initializer(kernel_initializer),
                dtype=self.dtype_policy,
                name=name,
            )
            return declare_einsum_dims(dense, **LEGEND)

        self.query_dense = projection(
            "query", num_query_heads, 2 * head_dim, "query"
        )
        self.key_dense = projection("key", num_key_value_heads, head_dim, "key")
        self.value_dense = projection(
            "value", num_key_value_heads, head_dim, "value"
        )
        self.query_norm = ZeroCenteredRMSNormalization(
            epsilon=layer_norm_epsilon,
            dtype=self.dtype_policy,
            name="query_norm",
        )
        self.key_norm = ZeroCenteredRMSNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="key_norm"
        )
        declare_dims(self.query_norm, scale=NORM_DIMS)
        declare_dims(self.key_norm, scale=NORM_DIMS)
        self.rotary_embedding = RotaryEmbedding(
            max_wavelength=rope_max_wavelength,
            scaling_factor=rope_scaling_factor,
            dtype=self.dtype_policy,
            name="rotary_embedding",
        )
        self.probabilities_dropout = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="dropout"
        )

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        self.query_dense.build(input_shape)
        self.key_dense.build(input_shape)
        self.value_dense.build(input_shape)
        self.output_dense = keras.layers.EinsumDense(
            EQUATIONS["output"],
            output_shape=(None, hidden_dim),
            kernel_initializer=fresh_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="attention_output",
        )
        declare_einsum_dims(self.output_dense, **LEGEND)
        self.output_dense.build(
            (None, None, self.num_query_heads, self.head_dim)
        )
        heads_shape = (None, None, self.num_query_heads, self.head_dim)
        self.query_norm.build(heads_shape)
        self.key_norm.build(heads_shape)

    def cache_shape(self, batch_size, max_length):
        """The shape of this layer's key/value cache."""
        return (
            batch_size,
            2,
            max_length,
            self.num_key_value_heads,
            self.head_dim,
        )

    def cache_kernel(self):
        """The kernel the key/value cache's layout follows."""
        return self.key_dense, "k", "h"

    def _rotate(self, x, start_index, positions):
        return rotate_leading(
            self.rotary_embedding,
            x,
            self.rotary_dim,
            start_index=start_index,
            positions=positions,
        )

    def call(
        self,
        inputs,
        attention_mask=None,
        cache=None,
        cache_update_index=None,
        training=None,
        positions=None,
    ):
        start_index = 0 if cache_update_index is None else cache_update_index
        query_and_gate = self.query_dense(inputs)
        query = query_and_gate[..., : self.head_dim]
        gate = query_and_gate[..., self.head_dim :]
        key = self.key_dense(inputs)
        value = self.value_dense(inputs)
        query = self._rotate(self.query_norm(query), start_index, positions)
        key = self._rotate(self.key_norm(key), start_index, positions)
        key = pin_activation(self, "keys", key)
        value = pin_activation(self, "keys", value)
        if cache is not None:
            key, value, cache = write_cache(cache, key, value, start_index)
        window = None
        if self.sliding_window_size is not None:
            distance = query_key_distance(
                ops.shape(query)[1], ops.shape(key)[1], start_index
            )
            window = window_mask(distance, self.sliding_window_size)
        mask = both_masks(attention_mask, window)
        query = query * ops.cast(self.head_dim**-0.5, query.dtype)
        outputs = grouped_query_attention(
            query,
            key,
            value,
            mask,
            probabilities_dropout=(
                self.probabilities_dropout if self.dropout > 0 else None
            ),
            training=training,
        )
        outputs = outputs * ops.sigmoid(gate)
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
                "partial_rotary_factor": self.partial_rotary_factor,
                "rope_max_wavelength": self.rope_max_wavelength,
                "rope_scaling_factor": self.rope_scaling_factor,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "sliding_window_size": self.sliding_window_size,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config
