"""Llama 4's attention, rotary embedding and mixture of experts.

Each is a small subclass of the shared layer it changes:

- `Llama4RotaryEmbedding`: Meta's complex-number RoPE, which rotates the
  interleaved pairs `(x[2i], x[2i + 1])` (the Hugging Face checkpoints keep
  Meta's query/key kernels, unpermuted), with Llama 3.1's frequency
  scaling.
- `Llama4Attention`: chunked-local attention on RoPE layers (a token sees
  the earlier tokens of its own `chunk_size` block only), a weightless RMS
  norm of queries and keys after RoPE, and on NoPE layers the queries'
  temperature `log(floor((pos + 1) / floor_scale) + 1) * attn_scale + 1`.
- `Llama4SparseMoE`: top-k routing with the sigmoid of the kept logits
  multiplying the expert's input (not its output), plus an ungated shared
  SwiGLU expert.
"""

import keras
from keras import ops

from keras_nlp.distribution.layout_map import pin_activation
from keras_nlp.distribution.layout_map import pin_input
from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.cached_attention import both_masks
from keras_nlp.layers.cached_attention import write_cache
from keras_nlp.layers.common import check_positive_ints
from keras_nlp.layers.fused_projection import project_together
from keras_nlp.layers.gated_feedforward import GatedFeedForward
from keras_nlp.layers.grouped_query_attention import grouped_query_attention
from keras_nlp.layers.sparse_moe import SparseMoE
from keras_nlp.models.llama.llama_rotary_embedding import LlamaRotaryEmbedding

SHARED_EXPERT = "shared_expert_dense"
# `CachedGroupedQueryAttention` options that `Llama4Attention.call` does
# not implement, with the only value it accepts.
_BASE_ONLY_OPTIONS = {
    "use_query_key_norm": False,
    "use_bias": False,
    "use_output_bias": False,
    "flat_output_kernel": False,
    "heads_first": False,
    "sliding_window_size": None,
    "use_alibi": False,
    "zero_unattended_queries": False,
    "logit_soft_cap": None,
    "use_sinks": False,
    "gated_query": False,
    "rotary_dim": None,
}


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class Llama4RotaryEmbedding(LlamaRotaryEmbedding):
    """`LlamaRotaryEmbedding` on interleaved feature pairs.

    Feature `2i` and feature `2i + 1` form the pair rotated by
    `position * theta_i` (Meta's `view_as_complex` convention, which the
    Llama 4 checkpoints' query and key kernels are laid out for), instead
    of feature `i` and feature `i + d/2`. Frequencies and Llama 3.1 scaling
    are `LlamaRotaryEmbedding`'s; with `low_freq_factor == high_freq_factor`
    (Llama 4 Scout) the interpolated band is empty.

    Example:

    >>> rope = Llama4RotaryEmbedding(max_wavelength=500000)
    >>> rope(np.ones((1, 4, 2, 8))).shape
    (1, 4, 2, 8)
    """

    def _inverse_frequency(self, features):
        if (
            self.frequency_adjustment_factor is not None
            and self.low_freq_factor == self.high_freq_factor
        ):
            # No band to interpolate: slow frequencies are stretched, the
            # others kept (the blend would divide by zero).
            base = super(LlamaRotaryEmbedding, self)._inverse_frequency(
                features
            )
            wavelength = 2 * 3.141592653589793 / base
            limit = float(self.pretraining_sequence_length) / (
                self.low_freq_factor
            )
            return ops.where(
                wavelength > limit,
                base / self.frequency_adjustment_factor,
                base,
            )
        return super()._inverse_frequency(features)

    def call(self, inputs, start_index=0, positions=None):
        features = inputs.shape[-1]
        if features is None or features % 2:
            raise ValueError(
                "Llama4RotaryEmbedding needs an even, static feature (last) "
                f"axis; got inputs with shape {inputs.shape}."
            )
        angles = self._angles(
            ops.shape(inputs)[1], features, start_index, positions
        )
        for _ in range(len(inputs.shape) - 3):
            angles = ops.expand_dims(angles, axis=2)
        cos = ops.cast(ops.cos(angles), self.compute_dtype)
        sin = ops.cast(ops.sin(angles), self.compute_dtype)
        even, odd = inputs[..., 0::2], inputs[..., 1::2]
        rotated = ops.stack(
            (even * cos - odd * sin, odd * cos + even * sin), axis=-1
        )
        return ops.reshape(rotated, ops.shape(inputs))


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class Llama4Attention(CachedGroupedQueryAttention):
    """`CachedGroupedQueryAttention` with Llama 4's per-layer options.

    Args:
        chunk_size: int or `None`. If set, a query at position `i` attends
            only to keys `j <= i` with `j // chunk_size == i // chunk_size`
            (the causal mask is the caller's); `None` attends to the whole
            prefix. With a cache, the cache holds every position and this
            mask picks the chunk's.
        normalize_rotated: bool. Divide each query and key head by its
            root mean square over `head_dim` (plus `layer_norm_epsilon`;
            no scale weight) after RoPE: Hugging Face's `Llama4TextL2Norm`,
            which despite its name takes the mean, not the sum.
        temperature_tuning: bool. Multiply the queries at position `p` by
            `log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1`.
        floor_scale: float. See `temperature_tuning`.
        attn_scale: float. See `temperature_tuning`.
        **kwargs: `CachedGroupedQueryAttention` arguments.

    Positions for RoPE, the chunks and the temperature are the tokens'
    indices in the sequence (or cache), as Hugging Face's
    `cache_position`, or `positions` when given: a left-padded prompt then
    counts from its first real token (the keys of the cache shifted
    alike), so its chunks and temperatures are those it has alone.
    """

    def __init__(
        self,
        *args,
        chunk_size=None,
        normalize_rotated=False,
        temperature_tuning=False,
        floor_scale=8192.0,
        attn_scale=0.1,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        if chunk_size is not None:
            check_positive_ints(chunk_size=chunk_size)
        # `call` is Llama 4's own: the base class's other variants are
        # not read there, so they are refused rather than ignored.
        unsupported = {
            key: kwargs[key]
            for key in _BASE_ONLY_OPTIONS
            if kwargs.get(key, _BASE_ONLY_OPTIONS[key])
            != _BASE_ONLY_OPTIONS[key]
        }
        if unsupported:
            raise ValueError(
                "Llama4Attention does not take these CachedGroupedQuery"
                f"Attention options (chunk_size is its window). Received: "
                f"{unsupported}."
            )
        self.chunk_size = chunk_size
        self.normalize_rotated = normalize_rotated
        self.temperature_tuning = temperature_tuning
        self.floor_scale = floor_scale
        self.attn_scale = attn_scale

    def _positions(self, query_length, key_length, start_index, positions):
        """`(query positions, key positions)`, `(batch or 1, length)`: the
        indices, or `positions` for the queries and the keys' indices
        shifted by each row's offset between the two."""
        indices = ops.arange(query_length, dtype="int32") + ops.cast(
            start_index, "int32"
        )
        keys = ops.arange(key_length, dtype="int32")[None]
        if positions is None:
            return indices[None], keys
        positions = ops.cast(positions, "int32")
        # A row's last query is a real token (padding is on the left).
        offset = indices[-1] - positions[:, -1:]
        return positions, keys - offset

    def _chunk_mask(self, query_positions, key_positions):
        """Whether each query and key share a chunk, `(batch or 1, q, k)`."""
        if self.chunk_size is None:
            return None
        query_chunks = query_positions // self.chunk_size
        key_chunks = key_positions // self.chunk_size
        return query_chunks[:, :, None] == key_chunks[:, None, :]

    def _rms(self, x):
        x32 = ops.cast(x, "float32")
        mean_square = ops.mean(ops.square(x32), axis=-1, keepdims=True)
        x32 = x32 * ops.rsqrt(mean_square + self.layer_norm_epsilon)
        return ops.cast(x32, x.dtype)

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
        query, key, value = project_together(
            inputs, [self.query_dense, self.key_dense, self.value_dense]
        )
        if self.rotary_embedding is not None:
            query = self.rotary_embedding(
                query, start_index=start_index, positions=positions
            )
            key = self.rotary_embedding(
                key, start_index=start_index, positions=positions
            )
        if self.normalize_rotated:
            query, key = self._rms(query), self._rms(key)
        key = pin_activation(self, "keys", key)
        value = pin_activation(self, "keys", value)
        if cache is not None:
            key, value, cache = write_cache(cache, key, value, start_index)
        query_positions, key_positions = self._positions(
            ops.shape(query)[1], ops.shape(key)[1], start_index, positions
        )
        if self.temperature_tuning:
            # Padding's negative positions would give log(0): its queries
            # are never read, but a NaN would reach real ones through 0 *.
            steps = ops.cast(ops.maximum(query_positions, 0) + 1, "float32")
            temperature = (
                ops.log(ops.floor(steps / self.floor_scale) + 1.0)
                * self.attn_scale
                + 1.0
            )
            query = query * ops.cast(temperature[:, :, None, None], query.dtype)
        # The chunks are this layer's position mask.
        mask = both_masks(
            attention_mask, self._chunk_mask(query_positions, key_positions)
        )
        scale = self.query_scale
        if scale is None:
            scale = self._head_dim**-0.5
        outputs = grouped_query_attention(
            query * ops.cast(scale, query.dtype),
            key,
            value,
            mask,
            probabilities_dropout=(
                self.probabilities_dropout if self.dropout > 0 else None
            ),
            training=training,
        )
        outputs = self.output_dense(pin_input(self.output_dense, outputs))
        return outputs if cache is None else (outputs, cache)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "chunk_size": self.chunk_size,
                "normalize_rotated": self.normalize_rotated,
                "temperature_tuning": self.temperature_tuning,
                "floor_scale": self.floor_scale,
                "attn_scale": self.attn_scale,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class Llama4SparseMoE(SparseMoE):
    """Llama 4's mixture: experts fed router-scaled inputs, plus a shared one.

    For each token `x` the router's `top_k` largest logits `l_e` are kept
    and the output is `shared(x) + sum_e expert_e(sigmoid(l_e) * x)` over
    the kept experts: the score scales what the expert reads, not what it
    writes (the experts are nonlinear, so the two differ). `shared` is an
    ungated SwiGLU (`GatedFeedForward`) of width `shared_intermediate_dim`
    under `shared_expert_dense/`.

    Args:
        num_experts: int. Number of routed experts.
        intermediate_dim: int. Feed-forward width of each routed expert.
        shared_intermediate_dim: int. Width of the shared expert.
        **kwargs: `SparseMoE` arguments (`top_k`, `fused_gate_intermediate`,
            `sublayer_names`, `compute`, ...); routing options other than
            the default are not Llama 4's and are refused.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.llama4.llama4_layers import Llama4SparseMoE

    moe = Llama4SparseMoE(
        num_experts=4, intermediate_dim=16, shared_intermediate_dim=16, top_k=1
    )
    outputs = moe(np.random.rand(2, 5, 8).astype("float32"))  # (2, 5, 8)
    ```
    """

    def __init__(
        self, num_experts, intermediate_dim, shared_intermediate_dim, **kwargs
    ):
        super().__init__(num_experts, intermediate_dim, **kwargs)
        if self.routing != "softmax_then_top_k" or self.router_aux_loss_coef:
            raise ValueError(
                "Llama4SparseMoE routes by the sigmoid of the top-k logits "
                "and has no auxiliary loss. Received: "
                f"routing={self.routing!r}, "
                f"router_aux_loss_coef={self.router_aux_loss_coef!r}."
            )
        check_positive_ints(shared_intermediate_dim=shared_intermediate_dim)
        self.shared_intermediate_dim = shared_intermediate_dim
        self.shared_expert = GatedFeedForward(
            shared_intermediate_dim,
            activation=self.activation,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name=SHARED_EXPERT,
        )

    def build(self, input_shape):
        super().build(input_shape)
        self.shared_expert.build(input_shape)

    def call(self, inputs, padding_mask=None, training=None):
        del padding_mask
        if training and self.router_jitter_noise > 0:
            inputs = inputs * keras.random.uniform(
                ops.shape(inputs),
                minval=1.0 - self.router_jitter_noise,
                maxval=1.0 + self.router_jitter_noise,
                dtype=inputs.dtype,
                seed=self.seed_generator,
            )
        logits = ops.cast(self.router(inputs), "float32")
        top_logits, top_indices = ops.top_k(logits, self.top_k)
        scores = ops.cast(ops.sigmoid(top_logits), inputs.dtype)
        outputs = self.shared_expert(inputs)
        one = ops.ones_like(scores[..., :1])
        # One pass of the bank per choice: each choice's expert reads the
        # input scaled by its own score.
        for choice in range(self.top_k):
            outputs = outputs + self.experts(
                inputs * scores[..., choice : choice + 1],
                top_indices[..., choice : choice + 1],
                one,
            )
        return outputs

    def get_config(self):
        config = super().get_config()
        config["shared_intermediate_dim"] = self.shared_intermediate_dim
        return config
