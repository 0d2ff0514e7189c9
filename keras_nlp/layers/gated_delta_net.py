"""Gated DeltaNet: linear attention with a gated delta-rule memory.

Each value head keeps a `(key_head_dim, value_head_dim)` matrix `S` that
every token first decays and then corrects towards its own key -> value
association (Yang et al., "Gated Delta Networks", as Qwen 3.5's linear
attention layers have it):

    S_t = exp(g_t) S_{t-1}
    S_t = S_t + beta_t k_t (v_t - S_t^T k_t)^T
    o_t = S_t^T q_t

with `q`, `k` L2-normalized per head (and `q` scaled by
`key_head_dim ** -0.5`), `beta = sigmoid(b)` and
`g = -exp(A_log) * softplus(a + dt_bias)`. Queries, keys and values come
from one fused projection followed by a short causal depthwise
convolution and SiLU; the output of each head is RMS-normalized, gated by
`silu(z)` and projected back to the hidden width.

A decoding cache is this memory plus the last `conv_kernel - 1` inputs of
the convolution: a fixed size whatever the length.
"""

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.distribution.dims import declare_flat_heads
from keras_nlp.layers.common import check_positive_ints
from keras_nlp.layers.dense import fresh_initializer
from keras_nlp.layers.dense import named_dense

# What each dimension of the layer's variables means. The fused projection
# holds, in this order, the queries and keys (`linear_key_heads` heads of
# `linear_key_head_dim`) and the values (`linear_value_heads` heads of
# `linear_value_head_dim`): one flat `linear_qkv` dimension.
QKV_DIMS = ("hidden", "linear_qkv")
CONV_DIMS = ("linear_qkv", "conv_kernel")
# The z projection and the output projection's rows: the value heads
# concatenated (`linear_value_heads * linear_value_head_dim`).
GATE_DIMS = ("hidden", "linear_value_heads")
OUTPUT_DIMS = ("linear_value_heads", "hidden")
# One feature per value head: the b and a projections, `A_log`, `dt_bias`.
HEAD_SCALAR_DIMS = ("hidden", "linear_value_heads")
PER_HEAD_DIMS = ("linear_value_heads",)
NORM_DIMS = ("linear_value_head_dim",)


def _l2_normalize(x, epsilon=1e-6):
    return x * ops.rsqrt(ops.sum(x * x, axis=-1, keepdims=True) + epsilon)


def gated_delta_rule(query, key, value, decay, beta, state, mask=None):
    """Runs the gated delta rule over a sequence, one token at a time.

    Args:
        query, key: float32 `(batch, seq, heads, key_head_dim)`, normalized
            and (queries) scaled.
        value: float32 `(batch, seq, heads, value_head_dim)`.
        decay: float32 `(batch, seq, heads)`, the log decay `g`.
        beta: float32 `(batch, seq, heads)`, the write strength.
        state: float32 `(batch, heads, key_head_dim, value_head_dim)`.
        mask: optional `(batch, seq)`, non-zero for real tokens; a padded
            token leaves the state as it is.

    Returns:
        `(outputs, state)`: outputs `(batch, seq, heads, value_head_dim)`
        and the state after the last token.
    """
    length = ops.shape(decay)[1]
    if mask is None:
        mask = ops.ones(ops.shape(decay)[:2], "float32")
    mask = ops.cast(mask, "bool")
    outputs = ops.zeros_like(value)

    def at(x, index):
        return ops.take(x, index, axis=1)

    # A loop rather than `ops.scan`, whose TensorFlow version wants each
    # step's output shaped like the state.
    def step(index, carry):
        memory, outputs = carry
        q, k, v = at(query, index), at(key, index), at(value, index)
        g, b, real = at(decay, index), at(beta, index), at(mask, index)
        decayed = memory * ops.exp(g)[:, :, None, None]
        recalled = ops.einsum("bhk,bhkv->bhv", k, decayed)
        correction = (v - recalled) * b[:, :, None]
        updated = decayed + k[:, :, :, None] * correction[:, :, None, :]
        updated = ops.where(real[:, None, None, None], updated, memory)
        read = ops.einsum("bhk,bhkv->bhv", q, updated)
        outputs = ops.slice_update(outputs, (0, index, 0, 0), read[:, None])
        return updated, outputs

    state, outputs = ops.fori_loop(0, length, step, (state, outputs))
    return outputs, state


@keras.saving.register_keras_serializable(package="keras_nlp.layers")
class GatedDeltaNet(keras.layers.Layer):
    """Qwen 3.5's linear attention: a gated delta-rule memory per head.

    Variables (paths under the layer's name, shapes as keras-hub's
    `Qwen3_5GatedDeltaNet`): `in_proj_qkv/kernel` `(hidden, 2 * K + V)`
    with `K = linear_num_key_heads * linear_key_head_dim` and
    `V = linear_num_value_heads * linear_value_head_dim` (queries, keys,
    values, in that order), `in_proj_z/kernel` `(hidden, V)`,
    `in_proj_b/kernel` and `in_proj_a/kernel` `(hidden,
    linear_num_value_heads)`, `conv1d_kernel` `(2 * K + V,
    linear_conv_kernel_dim)`, `dt_bias` and `A_log`
    `(linear_num_value_heads,)`, `norm/scale` `(linear_value_head_dim,)`
    and `out_proj/kernel` `(V, hidden)`. Value head `j` reads key head
    `j // (linear_num_value_heads // linear_num_key_heads)`.

    Args:
        hidden_size: int. Width of the inputs and outputs.
        linear_num_key_heads: int. Query/key heads.
        linear_num_value_heads: int. Value heads; a multiple of
            `linear_num_key_heads`.
        linear_key_head_dim: int. Size of each query/key head.
        linear_value_head_dim: int. Size of each value head.
        linear_conv_kernel_dim: int. Width of the causal convolution.
            Defaults to `4`.
        layer_norm_epsilon: float. Epsilon of the output norm. Defaults to
            `1e-6`.
        kernel_initializer: initializer of the projection kernels.
        **kwargs: forwarded to `keras.layers.Layer`.

    Call arguments:
        inputs: `(batch, seq, hidden_size)`.
        padding_mask: optional `(batch, seq)`, non-zero for real tokens.
            Padded tokens are zeroed before the projections and leave the
            memory unchanged, so left padding changes nothing.
        cache: optional `(conv_state, state)`: `(batch, conv_kernel - 1,
            2 * K + V)` earlier convolution inputs and the memory `(batch,
            linear_num_value_heads, linear_key_head_dim,
            linear_value_head_dim)` (float32). The call then returns
            `(outputs, cache)`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers.gated_delta_net import GatedDeltaNet

    layer = GatedDeltaNet(32, 2, 4, 8, 8)
    layer(np.random.rand(2, 5, 32).astype("float32")).shape  # (2, 5, 32)
    ```
    """

    def __init__(
        self,
        hidden_size,
        linear_num_key_heads,
        linear_num_value_heads,
        linear_key_head_dim,
        linear_value_head_dim,
        linear_conv_kernel_dim=4,
        layer_norm_epsilon=1e-6,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_ints(
            hidden_size=hidden_size,
            linear_num_key_heads=linear_num_key_heads,
            linear_num_value_heads=linear_num_value_heads,
            linear_key_head_dim=linear_key_head_dim,
            linear_value_head_dim=linear_value_head_dim,
            linear_conv_kernel_dim=linear_conv_kernel_dim,
        )
        if linear_num_value_heads % linear_num_key_heads:
            raise ValueError(
                "`linear_num_key_heads` must divide `linear_num_value_heads`"
                f". Received: linear_num_key_heads={linear_num_key_heads}, "
                f"linear_num_value_heads={linear_num_value_heads}."
            )
        self.hidden_size = hidden_size
        self.linear_num_key_heads = linear_num_key_heads
        self.linear_num_value_heads = linear_num_value_heads
        self.linear_key_head_dim = linear_key_head_dim
        self.linear_value_head_dim = linear_value_head_dim
        self.linear_conv_kernel_dim = linear_conv_kernel_dim
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.key_dim = linear_num_key_heads * linear_key_head_dim
        self.value_dim = linear_num_value_heads * linear_value_head_dim
        self.conv_dim = 2 * self.key_dim + self.value_dim

        def dense(width, dims, name):
            return named_dense(
                width,
                dims,
                name=name,
                use_bias=False,
                kernel_initializer=self.kernel_initializer,
                dtype=self.dtype_policy,
            )

        self.in_proj_qkv = dense(self.conv_dim, QKV_DIMS, "in_proj_qkv")
        self.in_proj_z = dense(self.value_dim, GATE_DIMS, "in_proj_z")
        self.in_proj_b = dense(
            linear_num_value_heads, HEAD_SCALAR_DIMS, "in_proj_b"
        )
        self.in_proj_a = dense(
            linear_num_value_heads, HEAD_SCALAR_DIMS, "in_proj_a"
        )
        self.norm = keras.layers.RMSNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="norm"
        )
        declare_dims(self.norm, scale=NORM_DIMS)
        self.out_proj = dense(hidden_size, OUTPUT_DIMS, "out_proj")
        declare_dims(
            self,
            conv1d_kernel=CONV_DIMS,
            dt_bias=PER_HEAD_DIMS,
            A_log=PER_HEAD_DIMS,
        )
        # A mesh axis splits the flat dimensions that make heads only
        # between heads (the output projection's rows are contracted: any
        # split is exact there).
        qkv_heads = (
            (2 * linear_num_key_heads, linear_key_head_dim),
            (linear_num_value_heads, linear_value_head_dim),
        )
        value_heads = ((linear_num_value_heads, linear_value_head_dim),)
        declare_flat_heads(self.in_proj_qkv, "kernel", linear_qkv=qkv_heads)
        declare_flat_heads(self, "conv1d_kernel", linear_qkv=qkv_heads)
        declare_flat_heads(
            self.in_proj_z, "kernel", linear_value_heads=value_heads
        )

    def build(self, input_shape):
        for dense in (
            self.in_proj_qkv,
            self.in_proj_z,
            self.in_proj_b,
            self.in_proj_a,
        ):
            dense.build(input_shape)
        self.conv1d_kernel = self.add_weight(
            name="conv1d_kernel",
            shape=(self.conv_dim, self.linear_conv_kernel_dim),
            initializer=fresh_initializer(self.kernel_initializer),
            dtype=self.variable_dtype,
        )
        self.dt_bias = self.add_weight(
            name="dt_bias",
            shape=(self.linear_num_value_heads,),
            initializer="ones",
            dtype=self.variable_dtype,
        )
        self.A_log = self.add_weight(
            name="A_log",
            shape=(self.linear_num_value_heads,),
            initializer="zeros",
            dtype=self.variable_dtype,
        )
        self.norm.build((None, self.linear_value_head_dim))
        self.out_proj.build((*input_shape[:-1], self.value_dim))

    def cache_shapes(self, batch_size):
        """Shapes of `(conv_state, state)` for a batch."""
        return (
            (batch_size, self.linear_conv_kernel_dim - 1, self.conv_dim),
            (
                batch_size,
                self.linear_num_value_heads,
                self.linear_key_head_dim,
                self.linear_value_head_dim,
            ),
        )

    def _convolve(self, mixed, conv_state):
        """Causal depthwise convolution then SiLU over `mixed` `(batch,
        seq, channels)`, after `conv_state` `(batch, kernel - 1,
        channels)`; returns the outputs and the new state."""
        width = self.linear_conv_kernel_dim
        length = ops.shape(mixed)[1]
        window = ops.concatenate([conv_state, mixed], axis=1)
        kernel = ops.cast(self.conv1d_kernel, mixed.dtype)
        outputs = 0
        for tap in range(width):
            outputs = outputs + window[:, tap : tap + length] * kernel[:, tap]
        new_state = window[:, ops.shape(window)[1] - (width - 1) :]
        return ops.silu(outputs), new_state

    def call(self, inputs, padding_mask=None, cache=None, training=None):
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        if padding_mask is not None:
            inputs = inputs * ops.cast(padding_mask, inputs.dtype)[..., None]
        if cache is None:
            conv_shape, state_shape = self.cache_shapes(batch)
            conv_state = ops.zeros(conv_shape, inputs.dtype)
            state = ops.zeros(state_shape, "float32")
        else:
            conv_state, state = cache
            conv_state = ops.cast(conv_state, inputs.dtype)
        mixed, conv_state = self._convolve(self.in_proj_qkv(inputs), conv_state)
        heads = self.linear_num_value_heads
        groups = heads // self.linear_num_key_heads
        query, key, value = ops.split(
            mixed, [self.key_dim, 2 * self.key_dim], axis=-1
        )
        key_shape = (
            batch,
            length,
            self.linear_num_key_heads,
            self.linear_key_head_dim,
        )
        query = _l2_normalize(
            ops.cast(ops.reshape(query, key_shape), "float32")
        )
        key = _l2_normalize(ops.cast(ops.reshape(key, key_shape), "float32"))
        query = query * self.linear_key_head_dim**-0.5
        if groups > 1:
            query = ops.repeat(query, groups, axis=2)
            key = ops.repeat(key, groups, axis=2)
        value = ops.reshape(
            ops.cast(value, "float32"),
            (batch, length, heads, self.linear_value_head_dim),
        )
        beta = ops.sigmoid(ops.cast(self.in_proj_b(inputs), "float32"))
        rate = ops.cast(self.in_proj_a(inputs), "float32") + ops.cast(
            self.dt_bias, "float32"
        )
        decay = -ops.exp(ops.cast(self.A_log, "float32")) * ops.softplus(rate)
        outputs, state = gated_delta_rule(
            query, key, value, decay, beta, state, mask=padding_mask
        )
        outputs = self.norm(ops.cast(outputs, self.compute_dtype))
        gate = ops.reshape(
            self.in_proj_z(inputs),
            (batch, length, heads, self.linear_value_head_dim),
        )
        outputs = outputs * ops.silu(gate)
        outputs = self.out_proj(ops.reshape(outputs, (batch, length, -1)))
        if cache is None:
            return outputs
        return outputs, (conv_state, state)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_size": self.hidden_size,
                "linear_num_key_heads": self.linear_num_key_heads,
                "linear_num_value_heads": self.linear_num_value_heads,
                "linear_key_head_dim": self.linear_key_head_dim,
                "linear_value_head_dim": self.linear_value_head_dim,
                "linear_conv_kernel_dim": self.linear_conv_kernel_dim,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config
