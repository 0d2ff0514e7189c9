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
the convolution: a fixed size whatever the length. A decoding step runs
the rule token by token (`gated_delta_rule`); prompts and training run it
by chunks (`chunked_gated_delta_rule`), with the same results.
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


def _unit_lower_triangular_inverse(strict):
    """The inverse of `I + strict`, `strict` `(..., n, n)` strictly lower
    triangular, by blocks of doubling size.

    Not `ops.solve_triangular`: on JAX's CPU backend (jaxlib 0.10) it
    splits its batch over XLA's thread pool and waits inside the pool, so
    solves running at once (a gradient has two, a program over several
    CPU devices one per device) can hold every thread and never return; a
    gradient hung so on 2 cores. Here each of the `log2(n)` levels is two
    batched matrix products on every backend: the inverse of
    `[[I + A11, 0], [A21, I + A22]]` is `[[T11, 0], [-T22 A21 T11, T22]]`
    with `T11`, `T22` the inverses of the diagonal blocks, so every product
    is of blocks of the true inverse (no growing powers of `strict`).
    """
    size = strict.shape[-1]
    lead = ops.shape(strict)[:-2]
    # A power of two: the padded system is `diag(I + strict, I)`, whose
    # inverse holds the one wanted in its top-left corner.
    padded = 1 << (size - 1).bit_length()
    strict = ops.reshape(strict, (-1, size, size))
    strict = ops.pad(strict, [[0, 0], [0, padded - size], [0, padded - size]])
    # The diagonal blocks of the inverse, `(matrices, blocks, width,
    # width)`: 1 for blocks of one row.
    blocks = ops.ones_like(strict[:, :, :1])[..., None]
    width = 1
    while width < padded:
        pairs = padded // (2 * width)
        grid = ops.reshape(strict, (-1, pairs, 2 * width, pairs, 2 * width))
        # The diagonal blocks of twice the width, `(matrices, pairs, 2 *
        # width, 2 * width)`; their lower-left quarter is `A21`.
        merged = ops.moveaxis(ops.diagonal(grid, axis1=1, axis2=3), -1, 1)
        blocks = ops.reshape(blocks, (-1, pairs, 2, width, width))
        upper, lower = blocks[:, :, 0], blocks[:, :, 1]
        corner = -ops.matmul(
            lower, ops.matmul(merged[..., width:, :width], upper)
        )
        blocks = ops.concatenate(
            [
                ops.concatenate([upper, ops.zeros_like(upper)], axis=-1),
                ops.concatenate([corner, lower], axis=-1),
            ],
            axis=-2,
        )
        width *= 2
    inverse = blocks[:, 0, :size, :size]
    return ops.reshape(inverse, (*lead, size, size))


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


def chunked_gated_delta_rule(
    query, key, value, decay, beta, state, mask=None, chunk_size=64
):
    """Runs the gated delta rule over a sequence, a chunk at a time.

    The same `(outputs, state)` as `gated_delta_rule` (to float32
    rounding), with the work inside each chunk done by matrix products.
    Within a chunk that starts from the state `S0`, with `G_t` the sum of
    the log decays up to token `t` of the chunk, every token writes
    `u_t = beta_t (v_t - exp(G_t) S0^T k_t - sum_{s<t} exp(G_t - G_s)
    (k_t . k_s) u_s)`, so the writes solve the unit lower-triangular
    system `(I + A) U = beta V - beta exp(G) K S0` with `A_ts = beta_t
    exp(G_t - G_s) k_t . k_s` for `s < t`. Its solution (by the inverse
    of `I + A`, formed once per chunk) splits into a part independent of
    `S0` and a part linear in it, both computed for every chunk at once;
    only `U = U0 - W S0`, the reads `o_t = exp(G_t) S0^T
    q_t + sum_{s<=t} exp(G_t - G_s) (q_t . k_s) u_s` and the next state
    `exp(G_C) S0 + sum_s exp(G_C - G_s) k_s u_s^T` are left to the loop
    over chunks.

    Args:
        query, key, value, decay, beta, state, mask: as
            `gated_delta_rule`'s.
        chunk_size: int. Tokens per chunk; a shorter sequence is one chunk
            of its own length. Defaults to `64`.

    Returns:
        `(outputs, state)`: outputs `(batch, seq, heads, value_head_dim)`
        and the state after the last token.
    """
    query, key, value, decay, beta, state = (
        ops.cast(x, "float32") for x in (query, key, value, decay, beta, state)
    )
    batch, length, heads, key_dim = ops.shape(key)
    value_dim = ops.shape(value)[-1]
    if mask is not None:
        # A padded token writes nothing (beta 0) and does not decay the
        # state (g 0), so the state passes it unchanged. Its key and value
        # are zeroed too: beta 0 times a non-finite value would not be 0.
        real = ops.cast(mask, "bool")[:, :, None]
        beta = ops.where(real, beta, 0.0)
        decay = ops.where(real, decay, 0.0)
        key = ops.where(real[..., None], key, 0.0)
        value = ops.where(real[..., None], value, 0.0)
    if isinstance(length, int):
        # Padding a short prompt to a whole chunk would be wasted work.
        chunk_size = max(1, min(chunk_size, length))
    # Tokens appended at the end are padding as above (all zeros), and
    # their outputs are cut off.
    padding = (-length) % chunk_size
    chunks = (length + padding) // chunk_size

    def to_chunks(x):
        # (batch, seq, heads, ...) -> (chunks, batch, heads, chunk, ...):
        # the loop takes whole chunks from the leading axis.
        widths = [[0, 0], [0, padding]] + [[0, 0]] * (len(x.shape) - 2)
        x = ops.pad(x, widths)
        x = ops.reshape(x, (batch, chunks, chunk_size, *ops.shape(x)[2:]))
        order = (1, 0, 3, 2) + tuple(range(4, len(x.shape)))
        return ops.transpose(x, order)

    query, key, value, decay, beta = (
        to_chunks(x) for x in (query, key, value, decay, beta)
    )
    cumulative = ops.cumsum(decay, axis=-1)
    positions = ops.arange(chunk_size)
    causal = positions[:, None] >= positions[None, :]
    earlier = positions[:, None] > positions[None, :]
    # G_t - G_s for s <= t, summed over the tokens s < r <= t alone: the
    # difference of two cumulative sums is rounded to their size (G near
    # -100 at the end of a chunk leaves exp(G_t - G_s) a 1e-5 relative
    # error, ten times the token loop's error in the outputs). For decays
    # <= 0 it is at most 0, and above the diagonal the sum is empty, so
    # no exp can overflow.
    gaps = ops.cumsum(ops.where(earlier, decay[..., :, None], 0.0), axis=-2)
    ratios = ops.where(causal, ops.exp(gaps), 0.0)
    keys_keys = ops.einsum("...tk,...sk->...ts", key, key)
    interactions = ops.where(earlier, keys_keys * ratios * beta[..., None], 0.0)
    # Both right-hand sides, the values and the keys that read `S0`,
    # times the inverse of the unit lower-triangular system.
    decayed_beta = beta * ops.exp(cumulative)
    solved = ops.matmul(
        _unit_lower_triangular_inverse(interactions),
        ops.concatenate(
            [value * beta[..., None], key * decayed_beta[..., None]], axis=-1
        ),
    )
    fresh, reads_state = solved[..., :value_dim], solved[..., value_dim:]
    decayed_query = query * ops.exp(cumulative)[..., None]
    query_keys = ops.einsum("...tk,...sk->...ts", query, key) * ratios
    # What is left of each token's write at the end of its chunk, and of
    # the chunk's starting state.
    kept_keys = key * ops.exp(gaps[..., -1, :])[..., None]
    chunk_decay = ops.exp(cumulative[..., -1:])[..., None]
    outputs = ops.zeros(
        (chunks, batch, heads, chunk_size, value_dim), "float32"
    )

    def at(x, index):
        return ops.take(x, index, axis=0)

    def step(index, carry):
        memory, outputs = carry
        # This chunk's writes `U = U0 - W S0`, then its reads and the
        # state after it.
        written = at(fresh, index) - ops.einsum(
            "bhtk,bhkv->bhtv", at(reads_state, index), memory
        )
        read = ops.einsum(
            "bhtk,bhkv->bhtv", at(decayed_query, index), memory
        ) + ops.einsum("bhts,bhsv->bhtv", at(query_keys, index), written)
        memory = memory * at(chunk_decay, index) + ops.einsum(
            "bhtk,bhtv->bhkv", at(kept_keys, index), written
        )
        outputs = ops.slice_update(outputs, (index, 0, 0, 0, 0), read[None])
        return memory, outputs

    state, outputs = ops.fori_loop(0, chunks, step, (state, outputs))
    outputs = ops.reshape(
        ops.transpose(outputs, (1, 0, 3, 2, 4)),
        (batch, chunks * chunk_size, heads, value_dim),
    )
    return outputs[:, :length], state


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
        # A decoding step (one token, known when tracing) reads and writes
        # the memory once: the loop over tokens is cheapest there. Longer
        # or unknown lengths (prefill, training) go by chunks.
        if inputs.shape[1] == 1:
            delta_rule = gated_delta_rule
        else:
            delta_rule = chunked_gated_delta_rule
        outputs, state = delta_rule(
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
