"""The stacked expert weights of a `SparseMoE` and the three ways to run them.

`compute="sparse"` sorts the (token, expert) pairs by expert and has each
expert multiply only its own tokens (`jax.lax.ragged_dot`, a grouped
matmul; nothing is dropped), so a block costs `top_k` expert feed-forwards
per token whatever the number of experts, where XLA has a grouped-matmul
kernel (GPU, TPU). XLA's CPU backend computes `ragged_dot` as a dense dot
per group (its compiled cost is `num_experts` times the active FLOPs,
`benchmarks/moe_flops.md`), so there the dense path is cheaper.
`compute="dense"` runs every expert on every token with the unselected ones
weighted 0 (a few einsums over the stacked weights); it is the reference
the sparse path is tested against, and what non-JAX backends run, as Keras
has no grouped matmul. `"auto"` (the default) picks sparse on a JAX GPU or
TPU and dense otherwise.

`capacity_factor=c` trades droplessness for static shapes on any backend:
each expert gets `ceil(c * tokens * top_k / num_experts)` slots, the
(token, expert) pairs fill them (first choices first) and the experts run
one batched matmul over their slots (`keras_nlp/layers/expert_dispatch.py`),
so a block costs about `c * top_k` expert feed-forwards per token on CPU
too. Pairs that find their expert full are dropped.
"""

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.layers.common import get_activation
from keras_nlp.layers.expert_dispatch import capacity_per_expert
from keras_nlp.layers.expert_dispatch import combine
from keras_nlp.layers.expert_dispatch import dispatch
from keras_nlp.layers.expert_dispatch import expert_slots

# What each dimension of the expert weights is.
EXPERT_INPUT_DIMS = ("experts", "hidden", "ffw")
EXPERT_OUTPUT_DIMS = ("experts", "ffw", "hidden")
# The per-expert biases (with `use_bias`).
EXPERT_INPUT_BIAS_DIMS = ("experts", "ffw")
EXPERT_OUTPUT_BIAS_DIMS = ("experts", "hidden")

# The variables' names (Mixtral's), which are their checkpoint paths.
DEFAULT_VARIABLE_NAMES = {
    "gate": "expert_feedforward_gate_dense",
    "intermediate": "expert_feedforward_intermediate_dense",
    "output": "expert_feedforward_output_dense",
    "gate_bias": "expert_feedforward_gate_dense_bias",
    "intermediate_bias": "expert_feedforward_intermediate_dense_bias",
    "output_bias": "expert_feedforward_output_dense_bias",
}
# QuickGELU's factor: x * sigmoid(1.702 x) approximates GELU.
QUICK_GELU_ALPHA = 1.702


def expert_activation(name):
    """A gate activation by name; `"quick_gelu"` is `x * sigmoid(1.702 x)`."""
    if name == "quick_gelu":
        return lambda x: x * ops.sigmoid(QUICK_GELU_ALPHA * x)
    return get_activation(name)


def _use_sparse(compute):
    """Whether `compute` ("sparse", "dense" or "auto") runs sparsely here."""
    if keras.backend.backend() != "jax" or compute == "dense":
        return False
    if compute == "sparse":
        return True
    import jax

    return jax.default_backend() in ("gpu", "tpu")


class ExpertBank(keras.layers.Layer):
    """The stacked weights of `num_experts` gated feed-forwards.

    Holds raw variables (no `/kernel` suffix), as the checkpoints do:
    `gate` and `intermediate` `(experts, hidden, intermediate_dim)` and
    `output` `(experts, intermediate_dim, hidden)`; with
    `fused_gate_intermediate=True` a single `gate` variable
    `(experts, hidden, 2 * intermediate_dim)` holds both projections, the
    gate half first (`fused_layout="concatenated"`, Qwen 3 MoE) or in the
    even columns with the intermediate in the odd ones
    (`fused_layout="interleaved"`, GPT-OSS). With `use_bias`, each
    projection has a per-expert bias: `gate_bias` (and `intermediate_bias`)
    `(experts, width)`, `width` being that projection's, and `output_bias`
    `(experts, hidden)`.

    Built and called by `SparseMoE`; see its arguments (`use_bias` is its
    `use_expert_bias`, and `variable_names` overrides the keys of
    `DEFAULT_VARIABLE_NAMES`, as its `sublayer_names` does).
    """

    def __init__(
        self,
        num_experts,
        intermediate_dim,
        activation="silu",
        fused_gate_intermediate=False,
        kernel_initializer="glorot_uniform",
        variable_names=None,
        compute="auto",
        use_bias=False,
        fused_layout="concatenated",
        clamp_limit=None,
        intermediate_offset=0.0,
        capacity_factor=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.compute = compute
        self.capacity_factor = capacity_factor
        self.num_experts = num_experts
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.fused_gate_intermediate = fused_gate_intermediate
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.variable_names = {
            **DEFAULT_VARIABLE_NAMES,
            **(variable_names or {}),
        }
        self.use_bias = use_bias
        self.fused_layout = fused_layout
        self.clamp_limit = clamp_limit
        self.intermediate_offset = intermediate_offset
        self._activation = expert_activation(activation)
        names = self.variable_names
        declare_dims(
            self,
            **{
                names["gate"]: EXPERT_INPUT_DIMS,
                names["intermediate"]: EXPERT_INPUT_DIMS,
                names["output"]: EXPERT_OUTPUT_DIMS,
                names["gate_bias"]: EXPERT_INPUT_BIAS_DIMS,
                names["intermediate_bias"]: EXPERT_INPUT_BIAS_DIMS,
                names["output_bias"]: EXPERT_OUTPUT_BIAS_DIMS,
            },
        )

    def _weight(self, shape, kind, initializer=None):
        return self.add_weight(
            shape=shape,
            initializer=initializer or self.kernel_initializer,
            dtype=self.variable_dtype,
            name=self.variable_names[kind],
        )

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        experts, width = self.num_experts, self.intermediate_dim
        gate_width = 2 * width if self.fused_gate_intermediate else width
        # Each kernel, then its bias: the checkpoints' variable order
        # (GPT-OSS's `gate_up_proj`, `gate_up_proj_bias`, `down_proj`, ...),
        # which Keras's weight files index by.
        self.gate_bias = self.intermediate_bias = self.output_bias = None
        self.intermediate = None

        def bias(shape, kind):
            if not self.use_bias:
                return None
            return self._weight(shape, kind, "zeros")

        self.gate = self._weight((experts, hidden_dim, gate_width), "gate")
        self.gate_bias = bias((experts, gate_width), "gate_bias")
        if not self.fused_gate_intermediate:
            self.intermediate = self._weight(
                (experts, hidden_dim, width), "intermediate"
            )
            self.intermediate_bias = bias((experts, width), "intermediate_bias")
        self.output_kernel = self._weight(
            (experts, width, hidden_dim), "output"
        )
        self.output_bias = bias((experts, hidden_dim), "output_bias")

    def _split_fused(self, fused):
        """The gate and intermediate parts of the fused projection."""
        if self.fused_layout == "interleaved":
            return fused[..., 0::2], fused[..., 1::2]
        return ops.split(fused, 2, axis=-1)

    def _gated(self, gate, intermediate):
        """`act(gate) * (intermediate + offset)`, both clamped if asked."""
        if self.clamp_limit is not None:
            # GPT-OSS bounds the gate from above only: its activation is
            # already small for large negative inputs.
            gate = ops.minimum(gate, self.clamp_limit)
            intermediate = ops.clip(
                intermediate, -self.clamp_limit, self.clamp_limit
            )
        if self.intermediate_offset:
            intermediate = intermediate + self.intermediate_offset
        # Like DecoderBlock, the gate's activation runs in float32.
        gate = ops.cast(
            self._activation(ops.cast(gate, "float32")), self.compute_dtype
        )
        return intermediate * gate

    def call(self, inputs, top_indices, top_weights):
        """`(batch, seq, hidden)` inputs; each token's `top_k` experts
        `(batch, seq, k)` and their weights `(batch, seq, k)`."""
        if self.capacity_factor is not None:
            return self._with_capacity(inputs, top_indices, top_weights)
        if _use_sparse(self.compute):
            return self._sparse(inputs, top_indices, top_weights)
        return self._dense(inputs, top_indices, top_weights)

    def _experts_on_rows(self, rows, project):
        """The gated feed-forward of the rows, `project(x, kernel, bias)`
        applying each row's expert's projection."""
        gate = project(rows, self.gate, self.gate_bias)
        if self.intermediate is None:
            gate, intermediate = self._split_fused(gate)
        else:
            intermediate = project(
                rows, self.intermediate, self.intermediate_bias
            )
        hidden = self._gated(gate, intermediate)
        return project(hidden, self.output_kernel, self.output_bias)

    def _dense(self, inputs, top_indices, top_weights):
        selected = ops.one_hot(top_indices, self.num_experts, dtype="float32")
        routing_weights = ops.cast(
            ops.sum(selected * ops.cast(top_weights, "float32")[..., None], -2),
            self.compute_dtype,
        )
        gate = ops.einsum("bsh,ehf->bsef", inputs, self.gate)
        if self.gate_bias is not None:
            gate = gate + self.gate_bias
        if self.intermediate is None:
            gate, intermediate = self._split_fused(gate)
        else:
            intermediate = ops.einsum(
                "bsh,ehf->bsef", inputs, self.intermediate
            )
            if self.intermediate_bias is not None:
                intermediate = intermediate + self.intermediate_bias
        # Weighting before the output projection lets one einsum contract
        # both the expert and the feed-forward dimension.
        hidden = self._gated(gate, intermediate) * routing_weights[..., None]
        outputs = ops.einsum("bsef,efh->bsh", hidden, self.output_kernel)
        if self.output_bias is not None:
            outputs = outputs + ops.einsum(
                "bse,eh->bsh", routing_weights, self.output_bias
            )
        return outputs

    def _sparse(self, inputs, top_indices, top_weights):
        # Keras has no grouped matmul (nor a traceable bincount): this path
        # is JAX's.
        from jax.lax import ragged_dot
        from jax.numpy import bincount

        batch, length, hidden_dim = ops.shape(inputs)
        top_k = ops.shape(top_indices)[-1]
        tokens = ops.reshape(inputs, (-1, hidden_dim))
        experts = ops.reshape(top_indices, (-1,))
        # Each (token, expert) pair, grouped by expert: group e is the
        # rows expert e multiplies, `group_sizes[e]` of them.
        order = ops.argsort(experts)
        token_of_row = order // top_k
        expert_of_row = ops.take(experts, order)
        rows = ops.take(tokens, token_of_row, axis=0)
        group_sizes = bincount(experts, length=self.num_experts)

        def project(x, kernel, bias):
            projected = ragged_dot(x, kernel.value, group_sizes)
            if bias is None:
                return projected
            return projected + ops.take(bias.value, expert_of_row, axis=0)

        outputs = self._experts_on_rows(rows, project)
        weights = ops.take(ops.reshape(top_weights, (-1,)), order)
        outputs = outputs * ops.cast(weights, outputs.dtype)[:, None]
        outputs = ops.segment_sum(
            outputs, token_of_row, num_segments=batch * length
        )
        return ops.reshape(outputs, (batch, length, hidden_dim))

    def _with_capacity(self, inputs, top_indices, top_weights):
        batch, length, hidden_dim = ops.shape(inputs)
        top_k = ops.shape(top_indices)[-1]
        experts = self.num_experts
        capacity = capacity_per_expert(
            batch * length, top_k, experts, self.capacity_factor
        )
        slots = expert_slots(
            ops.reshape(top_indices, (-1, top_k)), experts, capacity
        )
        tokens = ops.reshape(inputs, (-1, hidden_dim))
        rows = dispatch(tokens, slots, experts * capacity)
        rows = ops.reshape(rows, (experts, capacity, hidden_dim))

        def project(x, kernel, bias):
            projected = ops.einsum("ecx,exy->ecy", x, kernel)
            if bias is None:
                return projected
            return projected + bias[:, None, :]

        outputs = self._experts_on_rows(rows, project)
        outputs = combine(
            ops.reshape(outputs, (-1, hidden_dim)),
            slots,
            ops.reshape(top_weights, (-1, top_k)),
        )
        return ops.reshape(outputs, (batch, length, hidden_dim))

    def compute_output_shape(self, input_shape):
        return input_shape
