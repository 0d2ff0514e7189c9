"""GPT-NeoX self-attention: one fused query/key/value projection."""

import keras
from keras import ops

from keras_nlp.distribution import DATA
from keras_nlp.distribution import MODEL
from keras_nlp.distribution.dims import declare_dims
from keras_nlp.distribution.dims import declare_einsum_dims
from keras_nlp.distribution.dims import einsum_dims
from keras_nlp.distribution.layout_map import pin_activation
from keras_nlp.distribution.layout_map import pin_input
from keras_nlp.layers.cached_attention import KERNEL_DIMS
from keras_nlp.layers.cached_attention import write_cache
from keras_nlp.layers.grouped_query_attention import grouped_query_attention
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.layers.rotary_embedding import RotaryEmbedding
from keras_nlp.layers.rotary_embedding import rotate_leading

# The fused projection: per head, the query, key and value features.
QUERY_KEY_VALUE_EQUATION = "btd,dnh->btnh"
LEGEND = dict(d="hidden", n="heads", h="qkv_head_dim")
QUERY_KEY_VALUE_DIMS = einsum_dims(QUERY_KEY_VALUE_EQUATION, LEGEND)
# Its bias `(heads, qkv_head_dim)` has no hidden dimension.
QUERY_KEY_VALUE_BIAS_DIMS = QUERY_KEY_VALUE_DIMS[1:]
# `(heads * head_dim, hidden)`: rows are the concatenated heads, like the
# flat output kernel of the shared attention.
OUTPUT_KERNEL_DIMS = KERNEL_DIMS["flat_output"]


def gpt_neo_x_attention_rules(prefix):
    """Layout rules of a `GPTNeoXAttention`'s weights under `prefix`.

    Heads on the model axis, so each head's query, key and value stay
    together on one device, and the output kernel's rows take the same
    heads; hidden on the data axis.
    """
    roles = {"heads": MODEL, "hidden": DATA}
    fused = prefix + "query_key_value/"
    return [
        named_rule(fused + "kernel", QUERY_KEY_VALUE_DIMS, roles),
        named_rule(fused + "bias", QUERY_KEY_VALUE_BIAS_DIMS, roles),
        named_rule(
            prefix + "attention_output/kernel", OUTPUT_KERNEL_DIMS, roles
        ),
    ]


def gpt_neo_x_kernel_initializer():
    """A fresh initializer for GPT-NeoX projection kernels (normal, 0.02)."""
    return keras.initializers.RandomNormal(stddev=0.02)


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class GPTNeoXAttention(keras.layers.Layer):
    """Multi-head self-attention with a fused projection and partial RoPE.

    One kernel of shape `(hidden_dim, num_heads, 3 * head_dim)` projects the
    inputs to queries, keys and values at once; within each head the last
    axis holds the query, then the key, then the value features. Rotary
    position embedding (rotate-half) is applied to the first
    `int(head_dim * rotary_percentage)` features of every query and key head;
    the remaining features carry no position information. The heads are
    concatenated and projected back to `hidden_dim` by a `(hidden_dim,
    hidden_dim)` dense layer with a bias.

    Args:
        num_heads: int. Number of attention heads; must divide the input
            width.
        rotary_percentage: float. Fraction of each head's features that are
            rotated, in `[0, 1]`; `int(head_dim * rotary_percentage)` must
            be even. Defaults to `0.25`.
        rotary_max_wavelength: int. Base wavelength of the rotary embedding.
            Defaults to `10000`.
        dropout: float. Dropout rate on the attention probabilities.
            Defaults to `0`.
        **kwargs: Forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: Tensor of shape `(batch, seq, hidden_dim)`.
        attention_mask: Optional boolean/integer tensor of shape
            `(batch, seq, seq)`; entry `[b, i, j]` says whether query `i` may
            attend to key `j`. A query row with no allowed key (a left-padded
            position) gets the plain average of the values, as from
            `keras.ops.dot_product_attention`; no real token reads it.
        training: bool. Enables dropout.
        cache: optional `(batch, 2, max_len, num_heads, head_dim)` keys and
            values of earlier steps; then the call returns `(outputs,
            updated_cache)`.
        cache_update_index: int or scalar tensor, the position of the first
            input token in the cache.
        positions: optional int `(batch, seq)` token positions for the
            rotary embedding (left-padded prompts).
    """

    def __init__(
        self,
        num_heads,
        rotary_percentage=0.25,
        rotary_max_wavelength=10000,
        dropout=0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not 0 <= rotary_percentage <= 1:
            raise ValueError(
                "`rotary_percentage` must be in [0, 1]. Received: "
                f"rotary_percentage={rotary_percentage}."
            )
        self.num_heads = num_heads
        self.rotary_percentage = rotary_percentage
        self.rotary_max_wavelength = rotary_max_wavelength
        self.dropout = dropout

    def build(self, input_shape):
        self.hidden_dim = input_shape[-1]
        if self.hidden_dim % self.num_heads:
            raise ValueError(
                "The input width must be divisible by `num_heads`. Received: "
                f"hidden_dim={self.hidden_dim}, num_heads={self.num_heads}."
            )
        self.head_dim = self.hidden_dim // self.num_heads
        self.rotary_dim = int(self.head_dim * self.rotary_percentage)
        if self.rotary_dim % 2:
            raise ValueError(
                "The rotated part of each head, int(head_dim * "
                "rotary_percentage), must be even (rotary embedding rotates "
                "feature pairs). Received: rotary_percentage="
                f"{self.rotary_percentage} with head_dim={self.head_dim} "
                f"(hidden_dim // num_heads), giving {self.rotary_dim}."
            )

        self.query_key_value_dense = keras.layers.EinsumDense(
            QUERY_KEY_VALUE_EQUATION,
            output_shape=(None, self.num_heads, 3 * self.head_dim),
            bias_axes="nh",
            kernel_initializer=gpt_neo_x_kernel_initializer(),
            dtype=self.dtype_policy,
            name="query_key_value",
        )
        declare_einsum_dims(self.query_key_value_dense, **LEGEND)
        self.query_key_value_dense.build(input_shape)

        # Takes the heads concatenated (head-major) as its input features.
        self.output_dense = keras.layers.Dense(
            self.hidden_dim,
            kernel_initializer=gpt_neo_x_kernel_initializer(),
            dtype=self.dtype_policy,
            name="attention_output",
        )
        declare_dims(self.output_dense, kernel=OUTPUT_KERNEL_DIMS)
        self.output_dense.build(input_shape)

        self.rotary_embedding = RotaryEmbedding(
            max_wavelength=self.rotary_max_wavelength,
            dtype=self.dtype_policy,
            name="rotary",
        )
        self.probabilities_dropout = keras.layers.Dropout(
            rate=self.dropout, dtype=self.dtype_policy, name="dropout"
        )

    @property
    def num_key_value_heads(self):
        """Every head has its own keys and values (the cache's heads)."""
        return self.num_heads

    def cache_shape(self, batch_size, max_length):
        """The shape of this layer's key/value cache (built layers only)."""
        return (batch_size, 2, max_length, self.num_heads, self.head_dim)

    def cache_kernel(self):
        """`(layer, kv_heads letter, head_dim letter)` whose kernel's layout
        the key/value cache follows: the fused kernel's heads (its last
        axis holds query, key and value, so head_dim is not followed)."""
        return self.query_key_value_dense, "n", None

    def _rotate(self, x, start_index, positions):
        """Applies RoPE to the first `rotary_dim` features of each head."""
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
        training=None,
        cache=None,
        cache_update_index=None,
        positions=None,
    ):
        fused = self.query_key_value_dense(inputs)
        query, key, value = ops.split(fused, 3, axis=-1)
        start_index = 0 if cache_update_index is None else cache_update_index
        query = self._rotate(query, start_index, positions)
        key = self._rotate(key, start_index, positions)
        # Context parallelism: keys and values gathered over the sequence.
        key = pin_activation(self, "keys", key)
        value = pin_activation(self, "keys", value)
        if cache is not None:
            key, value, cache = write_cache(cache, key, value, start_index)

        mask = None
        if attention_mask is not None:
            mask = ops.cast(attention_mask, "bool")
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
        batch, seq = ops.shape(outputs)[0], ops.shape(outputs)[1]
        outputs = ops.reshape(outputs, (batch, seq, self.hidden_dim))
        outputs = self.output_dense(pin_input(self.output_dense, outputs))
        if cache is not None:
            return outputs, cache
        return outputs

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "rotary_percentage": self.rotary_percentage,
                "rotary_max_wavelength": self.rotary_max_wavelength,
                "dropout": self.dropout,
            }
        )
        return config
