"""Gemma 4's self-attention: value norms, key-as-value and shared keys."""

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_einsum_dims
from keras_nlp.distribution.layout_map import pin_activation
from keras_nlp.distribution.layout_map import pin_input
from keras_nlp.layers.cached_attention import EQUATIONS
from keras_nlp.layers.cached_attention import LEGEND
from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.cached_attention import write_cache
from keras_nlp.layers.grouped_query_attention import grouped_query_attention
from keras_nlp.layers.rotary_embedding import RotaryEmbedding


def rotary_dim_of(head_dim, fraction):
    """The even number of features of a head that RoPE rotates: `fraction`
    of `head_dim`, at least 2 (Gemma 4's global layers rotate a quarter)."""
    rotated = int(fraction * head_dim)
    return max(2, rotated - rotated % 2)


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class ProportionalRotaryEmbedding(RotaryEmbedding):
    """RoPE on the first `rotary_fraction` of each half of the features.

    The pairs `(k, k + d / 2)` with `k < rotary_dim / 2` turn by
    `position * max_wavelength ** (-2k / d)`, the frequencies of the whole
    width `d`; the other pairs stay as they are (Hugging Face's
    "proportional" RoPE of Gemma 4's global layers). `rotary_fraction=1`
    is plain `RotaryEmbedding`.

    Args:
        rotary_fraction: float in `(0, 1]`. Defaults to `1.0`.
        **kwargs: `RotaryEmbedding`'s arguments.
    """

    def __init__(self, rotary_fraction=1.0, **kwargs):
        super().__init__(**kwargs)
        if not 0 < rotary_fraction <= 1:
            raise ValueError(
                "`rotary_fraction` must be in (0, 1]. Received: "
                f"rotary_fraction={rotary_fraction!r}."
            )
        self.rotary_fraction = rotary_fraction

    def _inverse_frequency(self, features):
        frequencies = super()._inverse_frequency(features)
        turning = rotary_dim_of(features, self.rotary_fraction) // 2
        keep = ops.arange(features // 2) < turning
        return ops.where(keep, frequencies, ops.zeros_like(frequencies))

    def get_config(self):
        config = super().get_config()
        config["rotary_fraction"] = self.rotary_fraction
        return config


def unit_rms(x, epsilon):
    """`x` over its root mean square on the last axis (no scale), in
    float32: Gemma 4's value norm."""
    dtype = x.dtype
    x = ops.cast(x, "float32")
    x = x * ops.rsqrt(ops.mean(ops.square(x), axis=-1, keepdims=True) + epsilon)
    return ops.cast(x, dtype)


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class Gemma4Attention(CachedGroupedQueryAttention):
    """Gemma 4's grouped-query attention (heads-first kernels).

    `CachedGroupedQueryAttention` with RMS-normalized query and key heads
    (`x * scale`), values RMS-normalized without a scale, and queries not
    scaled (`query_scale=1`: the norms bound the logits). Two options of
    Gemma 4 change which kernels exist:

    - `key_is_value`: no `value` kernel; the values are the key
      projection (before the key norm and RoPE), normalized. The global
      layers of the larger checkpoints.
    - `shares_key_value`: no `key` or `value` kernel nor key norm; the
      call takes `shared_key_value`, the keys and values an earlier layer
      computed (or holds in its cache), and this layer has no cache of its
      own (`cache_shape` is `None`).

    Args:
        key_is_value: bool. Defaults to `False`.
        shares_key_value: bool. Defaults to `False`.
        **kwargs: `CachedGroupedQueryAttention`'s arguments; pass
            `heads_first=True`, `use_query_key_norm=True`,
            `query_scale=1.0`.

    Call arguments:
        As `CachedGroupedQueryAttention`'s, and `shared_key_value`:
        `(keys, values)`, each `(batch, key_len, kv_heads, head_dim)`,
        required exactly when `shares_key_value`.

    Returns:
        `(outputs, (keys, values), cache)`: the outputs, the keys and
        values attended (a later layer may share them) and the updated
        cache (`None` without one).
    """

    def __init__(self, key_is_value=False, shares_key_value=False, **kwargs):
        super().__init__(**kwargs)
        self.key_is_value = key_is_value
        self.shares_key_value = shares_key_value

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        self._head_dim = self.head_dim or hidden_dim // self.num_query_heads
        self.query_dense = self._projection(
            EQUATIONS["heads_first_query"], self.num_query_heads, "nh", "query"
        )
        self.query_dense.build(input_shape)
        self.key_dense = self.value_dense = None
        if not self.shares_key_value:
            self.key_dense = self._projection(
                EQUATIONS["heads_first_key"],
                self.num_key_value_heads,
                "kh",
                "key",
            )
            self.key_dense.build(input_shape)
            if not self.key_is_value:
                self.value_dense = self._projection(
                    EQUATIONS["heads_first_value"],
                    self.num_key_value_heads,
                    "kh",
                    "value",
                )
                self.value_dense.build(input_shape)
        heads_shape = (None, None, self.num_query_heads, self._head_dim)
        if not self.shares_key_value:
            self.key_norm = self._norm("key_norm")
            self.key_norm.build(heads_shape)
        self.query_norm = self._norm("query_norm")
        self.query_norm.build(heads_shape)
        self.output_dense = keras.layers.EinsumDense(
            EQUATIONS["output"],
            output_shape=(None, hidden_dim),
            kernel_initializer=self._new_kernel_initializer(),
            dtype=self.dtype_policy,
            name=self._names["output"],
        )
        declare_einsum_dims(self.output_dense, **LEGEND)
        self.output_dense.build(heads_shape)
        self.sinks = None
        self.probabilities_dropout = keras.layers.Dropout(
            rate=self.dropout, dtype=self.dtype_policy, name="dropout"
        )

    def cache_shape(self, batch_size, max_length):
        """This layer's cache shape, or `None` when it shares another's."""
        if self.shares_key_value:
            return None
        return super().cache_shape(batch_size, max_length)

    def cache_kernel(self):
        # A sharing layer has no key kernel, hence no cache to plan.
        return self.key_dense, "k", "h"

    def call(
        self,
        inputs,
        attention_mask=None,
        cache=None,
        cache_update_index=None,
        training=None,
        positions=None,
        shared_key_value=None,
    ):
        if self.shares_key_value != (shared_key_value is not None):
            raise ValueError(
                f"Attention {self.name!r} has shares_key_value="
                f"{self.shares_key_value}: it takes `shared_key_value` "
                "exactly then. Received "
                f"shared_key_value={'a value' if shared_key_value else None}."
            )
        start_index = 0 if cache_update_index is None else cache_update_index
        epsilon = self.layer_norm_epsilon
        query = self.query_norm(self.query_dense(inputs))
        query = self.rotary_embedding(
            query, start_index=start_index, positions=positions
        )
        if self.shares_key_value:
            key, value = shared_key_value
        else:
            projected = self.key_dense(inputs)
            raw_value = (
                projected if self.key_is_value else self.value_dense(inputs)
            )
            key = self.rotary_embedding(
                self.key_norm(projected),
                start_index=start_index,
                positions=positions,
            )
            value = unit_rms(raw_value, epsilon)
            key = pin_activation(self, "keys", key)
            value = pin_activation(self, "keys", value)
            if cache is not None:
                key, value, cache = write_cache(cache, key, value, start_index)

        mask, _ = self._mask_and_bias(attention_mask, query, key, start_index)
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
        if mask is not None:
            # keras-hub zeroes the queries that attend to no key.
            has_keys = ops.any(mask, axis=-1)[:, :, None, None]
            outputs = ops.where(has_keys, outputs, ops.zeros_like(outputs))
        outputs = self.output_dense(pin_input(self.output_dense, outputs))
        return outputs, (key, value), cache

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "key_is_value": self.key_is_value,
                "shares_key_value": self.shares_key_value,
            }
        )
        return config
