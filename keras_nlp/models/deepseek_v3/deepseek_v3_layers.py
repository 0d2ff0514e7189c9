"""DeepSeek-V3's own layers: YaRN RoPE with its two `mscale`s, multi-head
latent attention (MLA) with a cache of the compressed latent, and the
sigmoid-routed, group-limited mixture of experts with a shared expert."""

import math

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.distribution.dims import declare_einsum_dims
from keras_nlp.distribution.layout_map import pin_input
from keras_nlp.layers.common import TakesLayers
from keras_nlp.layers.gated_feedforward import GatedFeedForward
from keras_nlp.layers.grouped_query_attention import grouped_query_attention
from keras_nlp.layers.sparse_moe import SparseMoE
from keras_nlp.models.gpt_oss.yarn_rotary_embedding import YarnRotaryEmbedding

# The projections' equations and what their letters mean: `q` the query
# latent (`q_lora_rank`), `c` the key/value latent plus the decoupled RoPE
# key (`kv_lora_rank + qk_rope_head_dim`), `l` the key/value latent.
EQUATIONS = {
    "query": "btd,dnh->btnh",
    "query_a": "btd,dq->btq",
    "query_b": "btq,qnh->btnh",
    "key_value_a": "btd,dc->btc",
    "key_value_b": "btl,lnh->btnh",
    "output": "btnh,nhd->btd",
}
LEGEND = dict(
    d="hidden",
    n="heads",
    h="head_dim",
    q="query_latent",
    c="key_value_latent",
    l="key_value_latent",
)
SUBLAYER_NAMES = {
    "query": "query",
    "query_a": "query_a",
    "query_a_norm": "query_a_layernorm",
    "query_b": "query_b",
    "key_value_a": "key_value_a",
    "key_value_a_norm": "key_value_a_layernorm",
    "key_value_b": "key_value_b",
    "output": "attention_output",
}
SHARED_EXPERT = "shared_expert_dense"
SCORE_CORRECTION_BIAS = "e_score_correction_bias"


def yarn_mscale(factor, mscale=1.0):
    """DeepSeek's YaRN magnitude `0.1 * mscale * ln(factor) + 1` (1 for a
    factor of at most 1)."""
    if factor <= 1:
        return 1.0
    return 0.1 * mscale * math.log(factor) + 1.0


def softmax_scale(qk_head_dim, rope_scaling_factor, rope_mscale_all_dims):
    """`1 / sqrt(qk_head_dim)`, times `yarn_mscale(factor, mscale_all_dim)`
    squared when YaRN is on and `mscale_all_dim` is set."""
    scale = qk_head_dim**-0.5
    if rope_scaling_factor > 1 and rope_mscale_all_dims:
        scale *= yarn_mscale(rope_scaling_factor, rope_mscale_all_dims) ** 2
    return scale


def deinterleave(x):
    """Features `(x0, x1, x2, x3, ...)` -> `(x0, x2, ..., x1, x3, ...)`.

    DeepSeek rotates adjacent pairs `(x[2i], x[2i + 1])`; after this the
    rotate-half RoPE rotates the same pairs. Queries and keys are permuted
    alike, so their dot products are those of the interleaved rotation.
    """
    return ops.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1)


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class DeepSeekV3RotaryEmbedding(YarnRotaryEmbedding):
    """YaRN RoPE whose cosine and sine are scaled by
    `yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim)`
    (1 for DeepSeek-V3's `mscale == mscale_all_dim`); the attention scale
    carries `yarn_mscale(factor, mscale_all_dim) ** 2` instead.

    Args:
        mscale: float. YaRN's `mscale`. Defaults to `1.0`.
        mscale_all_dim: float. YaRN's `mscale_all_dim`; `0` leaves the
            attention scale alone. Defaults to `0.0`.
        **kwargs: `YarnRotaryEmbedding` arguments.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.deepseek_v3.deepseek_v3_layers import (
        DeepSeekV3RotaryEmbedding,
    )

    rope = DeepSeekV3RotaryEmbedding(factor=40.0, mscale_all_dim=1.0)
    rope(np.ones((1, 4, 2, 64), "float32")).shape  # (1, 4, 2, 64)
    ```
    """

    def __init__(self, mscale=1.0, mscale_all_dim=0.0, **kwargs):
        super().__init__(**kwargs)
        self.mscale = mscale
        self.mscale_all_dim = mscale_all_dim

    def _amplitude(self, seq_len):
        del seq_len
        return yarn_mscale(self.factor, self.mscale) / yarn_mscale(
            self.factor, self.mscale_all_dim
        )

    def get_config(self):
        config = super().get_config()
        config["mscale"] = self.mscale
        config["mscale_all_dim"] = self.mscale_all_dim
        return config


def _pad_features(x, width):
    """`x` with zeros appended on the last axis up to `width`."""
    missing = width - x.shape[-1]
    if not missing:
        return x
    return ops.pad(x, [(0, 0)] * (len(x.shape) - 1) + [(0, missing)])


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class MultiHeadLatentAttention(TakesLayers, keras.layers.Layer):
    """DeepSeek's multi-head latent attention (MLA), with a latent cache.

    Queries: `query_b(norm(query_a(x)))` (`query(x)` when `q_lora_rank` is
    `None`), `(heads, qk_nope_head_dim + qk_rope_head_dim)` each. Keys and
    values: `key_value_a(x)` gives a latent of `kv_lora_rank` and one RoPE
    key of `qk_rope_head_dim` shared by every head; the normalized latent
    goes through `key_value_b` to each head's `qk_nope_head_dim` key part
    and `v_head_dim` value. Each head's key is its own part followed by the
    shared RoPE key; RoPE rotates adjacent feature pairs of the query's and
    key's RoPE parts. Logits are scaled by `query_scale`.

    The cache `(batch, 1, max_len, 1, kv_lora_rank + qk_rope_head_dim)`
    holds the normalized latent and the rotated RoPE key of each position,
    not per-head keys and values; each call expands it through
    `key_value_b` (not the absorbed form).

    Args:
        num_heads: int. Attention heads.
        q_lora_rank: int or `None`. Width of the query latent; `None` for
            a plain query projection.
        kv_lora_rank: int. Width of the key/value latent.
        qk_nope_head_dim: int. Per-head query/key features without RoPE.
        qk_rope_head_dim: int. Query/key features with RoPE (even).
        v_head_dim: int. Per-head value width.
        rotary_embedding: a `RotaryEmbedding` for the RoPE parts.
        query_scale: float. Factor on the logits.
        layer_norm_epsilon: float. Epsilon of the latent RMS norms.
        kernel_initializer: initializer of the projections.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: `(batch, seq, hidden)`.
        attention_mask: optional boolean `(batch, seq, key_len)`.
        cache: optional latent cache (above); the call then returns
            `(outputs, cache)`.
        cache_update_index: position of the first input token.
        positions: optional `(batch, seq)` RoPE positions.
        training: unused (no attention dropout).

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers import RotaryEmbedding
    from keras_nlp.models.deepseek_v3.deepseek_v3_layers import (
        MultiHeadLatentAttention,
    )

    attention = MultiHeadLatentAttention(
        num_heads=4,
        q_lora_rank=24,
        kv_lora_rank=16,
        qk_nope_head_dim=8,
        qk_rope_head_dim=4,
        v_head_dim=8,
        rotary_embedding=RotaryEmbedding(),
        query_scale=12**-0.5,
    )
    x = np.random.rand(2, 6, 32).astype("float32")
    attention(x).shape  # (2, 6, 32)
    # Decode one token into a latent cache of 8 positions.
    cache = np.zeros(attention.cache_shape(2, 8), "float32")
    step, cache = attention(x[:, :1], cache=cache, cache_update_index=0)
    ```
    """

    layer_arguments = ("rotary_embedding",)

    def __init__(
        self,
        num_heads,
        q_lora_rank,
        kv_lora_rank,
        qk_nope_head_dim,
        qk_rope_head_dim,
        v_head_dim,
        rotary_embedding,
        query_scale,
        layer_norm_epsilon=1e-6,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.q_lora_rank = q_lora_rank
        self.kv_lora_rank = kv_lora_rank
        self.qk_nope_head_dim = qk_nope_head_dim
        self.qk_rope_head_dim = qk_rope_head_dim
        self.v_head_dim = v_head_dim
        self.rotary_embedding = rotary_embedding
        self.query_scale = query_scale
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _dense(self, kind, output_shape):
        initializer = self.kernel_initializer.__class__.from_config(
            self.kernel_initializer.get_config()
        )
        dense = keras.layers.EinsumDense(
            EQUATIONS[kind],
            output_shape=output_shape,
            kernel_initializer=initializer,
            dtype=self.dtype_policy,
            name=SUBLAYER_NAMES[kind],
        )
        return declare_einsum_dims(dense, **LEGEND)

    def _norm(self, kind):
        return keras.layers.RMSNormalization(
            epsilon=self.layer_norm_epsilon,
            dtype=self.dtype_policy,
            name=SUBLAYER_NAMES[kind],
        )

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        heads = self.num_heads
        qk_head_dim = self.qk_nope_head_dim + self.qk_rope_head_dim
        self.query_dense = self.query_a = self.query_a_norm = None
        if self.q_lora_rank is None:
            self.query_dense = self._dense("query", (None, heads, qk_head_dim))
            self.query_dense.build(input_shape)
        else:
            self.query_a = self._dense("query_a", (None, self.q_lora_rank))
            self.query_a.build(input_shape)
            self.query_a_norm = self._norm("query_a_norm")
            self.query_a_norm.build((None, None, self.q_lora_rank))
            self.query_dense = self._dense(
                "query_b", (None, heads, qk_head_dim)
            )
            self.query_dense.build((None, None, self.q_lora_rank))
        self.key_value_a = self._dense(
            "key_value_a", (None, self.kv_lora_rank + self.qk_rope_head_dim)
        )
        self.key_value_a.build(input_shape)
        self.key_value_a_norm = self._norm("key_value_a_norm")
        self.key_value_a_norm.build((None, None, self.kv_lora_rank))
        self.key_value_b = self._dense(
            "key_value_b",
            (None, heads, self.qk_nope_head_dim + self.v_head_dim),
        )
        self.key_value_b.build((None, None, self.kv_lora_rank))
        self.output_dense = self._dense("output", (None, hidden_dim))
        self.output_dense.build((None, None, heads, self.v_head_dim))

    def cache_shape(self, batch_size, max_length):
        """The latent cache's shape: one "head" of the latent and the RoPE
        key together."""
        width = self.kv_lora_rank + self.qk_rope_head_dim
        return (batch_size, 1, max_length, 1, width)

    def cache_kernel(self):
        """The layer whose kernel the cache follows (`key_value_a`, whose
        latent the cache holds) and its heads / head_dim letters: it has
        no heads, so the plan keeps the cache's features whole."""
        return self.key_value_a, "n", "c"

    def _rope(self, x, start_index, positions):
        return self.rotary_embedding(
            deinterleave(x), start_index=start_index, positions=positions
        )

    def call(
        self,
        inputs,
        attention_mask=None,
        cache=None,
        cache_update_index=None,
        positions=None,
        training=None,
    ):
        del training
        start_index = 0 if cache_update_index is None else cache_update_index
        if self.query_a is None:
            query = self.query_dense(inputs)
        else:
            query = self.query_dense(self.query_a_norm(self.query_a(inputs)))
        query_nope = query[..., : self.qk_nope_head_dim]
        query_rope = self._rope(
            query[..., self.qk_nope_head_dim :], start_index, positions
        )
        compressed = self.key_value_a(inputs)
        latent = self.key_value_a_norm(compressed[..., : self.kv_lora_rank])
        # The RoPE key, one for all heads: `(batch, seq, 1, rope)`.
        key_rope = self._rope(
            compressed[..., None, self.kv_lora_rank :], start_index, positions
        )
        if cache is not None:
            entry = ops.concatenate(
                [latent[:, None, :, None, :], key_rope[:, None]], axis=-1
            )
            cache = ops.slice_update(cache, [0, 0, start_index, 0, 0], entry)
            latent = cache[:, 0, :, 0, : self.kv_lora_rank]
            key_rope = cache[:, 0, :, :, self.kv_lora_rank :]
        expanded = self.key_value_b(latent)
        key_nope = expanded[..., : self.qk_nope_head_dim]
        value = expanded[..., self.qk_nope_head_dim :]
        key_rope = ops.broadcast_to(
            key_rope, (*ops.shape(key_nope)[:-1], self.qk_rope_head_dim)
        )
        key = ops.concatenate([key_nope, key_rope], axis=-1)
        query = ops.concatenate([query_nope, query_rope], axis=-1)
        query = query * ops.cast(self.query_scale, query.dtype)
        mask = None
        if attention_mask is not None:
            mask = ops.cast(attention_mask, "bool")
        # The fused attention wants one head size: zero features added to
        # the values (or to queries and keys) change no output, and are
        # cut off after.
        qk_head_dim = self.qk_nope_head_dim + self.qk_rope_head_dim
        width = max(qk_head_dim, self.v_head_dim)
        query, key = (_pad_features(t, width) for t in (query, key))
        value = _pad_features(value, width)
        outputs = grouped_query_attention(query, key, value, mask)
        outputs = outputs[..., : self.v_head_dim]
        outputs = self.output_dense(pin_input(self.output_dense, outputs))
        return outputs if cache is None else (outputs, cache)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "q_lora_rank": self.q_lora_rank,
                "kv_lora_rank": self.kv_lora_rank,
                "qk_nope_head_dim": self.qk_nope_head_dim,
                "qk_rope_head_dim": self.qk_rope_head_dim,
                "v_head_dim": self.v_head_dim,
                "rotary_embedding": keras.saving.serialize_keras_object(
                    self.rotary_embedding
                ),
                "query_scale": self.query_scale,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config


def check_grouping(num_experts, num_experts_per_tok, n_group, topk_group):
    """Raises a `ValueError` unless the group-limited routing fits."""
    for name, value in (("n_group", n_group), ("topk_group", topk_group)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(
                f"`{name}` must be a positive integer. Received: "
                f"{name}={value!r}."
            )
    if num_experts % n_group or num_experts // n_group < 2:
        raise ValueError(
            "`n_group` must divide `n_routed_experts` into groups of at "
            "least 2 experts (a group scores by its top 2). Received: "
            f"n_routed_experts={num_experts}, n_group={n_group}."
        )
    if topk_group > n_group:
        raise ValueError(
            f"`topk_group` must be at most `n_group` ({n_group}). "
            f"Received: topk_group={topk_group}."
        )
    kept = topk_group * (num_experts // n_group)
    if num_experts_per_tok > kept:
        raise ValueError(
            "`num_experts_per_tok` must be at most the experts of the kept "
            f"groups (topk_group * n_routed_experts / n_group = {kept}). "
            f"Received: num_experts_per_tok={num_experts_per_tok}."
        )


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class DeepSeekV3MoE(SparseMoE):
    """DeepSeek-V3's mixture: sigmoid routing, group-limited top-k with a
    score-correction bias, routed experts plus always-on shared experts.

    Each token's scores are `s = sigmoid(x @ router)`. Selection reads the
    biased scores `s + e_score_correction_bias` (a non-trainable
    `(experts,)` variable): the experts split into `n_group` groups, each
    scored by the sum of its 2 largest biased scores; the `topk_group`
    best groups are kept and the `top_k` largest biased scores among their
    experts chosen. The chosen experts' weights are their unbiased `s`,
    divided by their sum if `normalize_top_k`, times
    `routed_scaling_factor`. The output adds the shared SwiGLU
    (`shared_expert_dense`, width `shared_intermediate_dim`).

    Args:
        num_experts: int. Routed experts.
        intermediate_dim: int. Width of each routed expert.
        shared_intermediate_dim: int. Width of the shared expert (all
            shared experts as one SwiGLU).
        n_group: int. Expert groups.
        topk_group: int. Groups kept per token.
        routed_scaling_factor: float. Factor on the routed weights.
        **kwargs: `SparseMoE` arguments (`top_k`, `normalize_top_k`,
            `compute`, `kernel_initializer`, `name`, `dtype`, ...).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.deepseek_v3.deepseek_v3_layers import DeepSeekV3MoE

    moe = DeepSeekV3MoE(
        num_experts=8,
        intermediate_dim=16,
        shared_intermediate_dim=16,
        n_group=4,
        topk_group=2,
        routed_scaling_factor=2.5,
        top_k=2,
    )
    moe(np.random.rand(2, 5, 32).astype("float32")).shape  # (2, 5, 32)
    ```
    """

    def __init__(
        self,
        num_experts,
        intermediate_dim,
        shared_intermediate_dim,
        n_group=1,
        topk_group=1,
        routed_scaling_factor=1.0,
        **kwargs,
    ):
        super().__init__(num_experts, intermediate_dim, **kwargs)
        check_grouping(num_experts, self.top_k, n_group, topk_group)
        self.shared_intermediate_dim = shared_intermediate_dim
        self.n_group = n_group
        self.topk_group = topk_group
        self.routed_scaling_factor = routed_scaling_factor
        self.shared_expert = GatedFeedForward(
            shared_intermediate_dim,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name=SHARED_EXPERT,
        )
        declare_dims(self, **{SCORE_CORRECTION_BIAS: ("experts",)})

    def build(self, input_shape):
        super().build(input_shape)
        self.e_score_correction_bias = self.add_weight(
            shape=(self.num_experts,),
            initializer="zeros",
            trainable=False,
            dtype=self.variable_dtype,
            name=SCORE_CORRECTION_BIAS,
        )
        self.shared_expert.build(input_shape)

    def _routing(self, inputs):
        scores = ops.sigmoid(ops.cast(self.router(inputs), "float32"))
        biased = scores + ops.cast(self.e_score_correction_bias, "float32")
        per_group = self.num_experts // self.n_group
        grouped = ops.reshape(
            biased, (*ops.shape(biased)[:-1], self.n_group, per_group)
        )
        group_scores = ops.sum(ops.top_k(grouped, 2)[0], axis=-1)
        _, kept_groups = ops.top_k(group_scores, self.topk_group)
        kept = ops.sum(
            ops.one_hot(kept_groups, self.n_group, dtype="float32"), axis=-2
        )
        kept = ops.repeat(kept, per_group, axis=-1) > 0
        # Experts of dropped groups can never be chosen.
        candidates = ops.where(kept, biased, ops.full_like(biased, -1e30))
        _, top_indices = ops.top_k(candidates, self.top_k)
        weights = ops.take_along_axis(scores, top_indices, axis=-1)
        if self.normalize_top_k:
            weights = weights / (
                ops.sum(weights, axis=-1, keepdims=True) + 1e-20
            )
        weights = weights * self.routed_scaling_factor
        return scores, top_indices, weights

    def call(self, inputs, padding_mask=None, training=None):
        routed = super().call(
            inputs, padding_mask=padding_mask, training=training
        )
        return routed + self.shared_expert(inputs)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "shared_intermediate_dim": self.shared_intermediate_dim,
                "n_group": self.n_group,
                "topk_group": self.topk_group,
                "routed_scaling_factor": self.routed_scaling_factor,
            }
        )
        return config
