"""Sparse mixture-of-experts feed-forward (Mixtral, Qwen-MoE style).

The block is a drop-in `feedforward` for `DecoderLayer`: a router picks the
top-k experts of each token and the block returns the routing-weighted sum
of their gated feed-forwards.

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
too. Pairs that find their expert full are dropped. `configure_experts`
switches the blocks of a built model.

Options cover the checkpoints' variants: routing by softmax then top-k
(Mixtral, Qwen MoE) or top-k logits then a softmax over the kept ones
(GPT-OSS), a router bias, per-expert biases, a fused gate/intermediate
weight laid out in halves (Qwen 3 MoE) or interleaved (GPT-OSS), and
GPT-OSS's clamped gated unit.
"""

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.layers.decoder_layer import get_activation
from keras_nlp.layers.expert_dispatch import capacity_per_expert
from keras_nlp.layers.expert_dispatch import combine
from keras_nlp.layers.expert_dispatch import dispatch
from keras_nlp.layers.expert_dispatch import expert_slots

# What each dimension of the expert weights and the router kernel is.
EXPERT_INPUT_DIMS = ("experts", "hidden", "ffw")
EXPERT_OUTPUT_DIMS = ("experts", "ffw", "hidden")
ROUTER_DIMS = ("hidden", "experts")
# The per-expert biases (with `use_expert_bias`).
EXPERT_INPUT_BIAS_DIMS = ("experts", "ffw")
EXPERT_OUTPUT_BIAS_DIMS = ("experts", "hidden")

DEFAULT_SUBLAYER_NAMES = {
    "router": "sparse_feedforward_gate_dense",
    "experts": "experts",
    "gate": "expert_feedforward_gate_dense",
    "intermediate": "expert_feedforward_intermediate_dense",
    "output": "expert_feedforward_output_dense",
    "gate_bias": "expert_feedforward_gate_dense_bias",
    "intermediate_bias": "expert_feedforward_intermediate_dense_bias",
    "output_bias": "expert_feedforward_output_dense_bias",
}
ROUTINGS = ("softmax_then_top_k", "top_k_then_softmax")
FUSED_LAYOUTS = ("concatenated", "interleaved")
# QuickGELU's factor: x * sigmoid(1.702 x) approximates GELU.
QUICK_GELU_ALPHA = 1.702


def expert_activation(name):
    """A gate activation by name; `"quick_gelu"` is `x * sigmoid(1.702 x)`."""
    if name == "quick_gelu":
        return lambda x: x * ops.sigmoid(QUICK_GELU_ALPHA * x)
    return get_activation(name)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


COMPUTES = ("auto", "sparse", "dense")


def check_expert_compute(compute, capacity_factor):
    """Raises a `ValueError` naming a bad `compute` or `capacity_factor`."""
    if compute not in COMPUTES:
        raise ValueError(
            f"`compute` must be one of {', '.join(map(repr, COMPUTES))}. "
            f"Received: compute={compute!r}."
        )
    if capacity_factor is None:
        return
    if not (_is_number(capacity_factor) and capacity_factor > 0):
        raise ValueError(
            "`capacity_factor` must be a positive number (slots per expert "
            "relative to an even split; e.g. 1.25) or None for dropless "
            f"compute. Received: capacity_factor={capacity_factor!r}."
        )
    if compute == "dense":
        raise ValueError(
            "`capacity_factor` sets the slots of sparse compute; "
            "compute='dense' runs every expert on every token and drops "
            "nothing. Pass compute='auto' or 'sparse' with a capacity "
            f"factor, or capacity_factor=None. Received: compute={compute!r}, "
            f"capacity_factor={capacity_factor!r}."
        )


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

    Built and called by `SparseMoE`; see its arguments.
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
            **DEFAULT_SUBLAYER_NAMES,
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
        # Like DecoderLayer, the gate's activation runs in float32.
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


class NestedLayer(keras.layers.Layer):
    """Calls `layer` one path segment deeper: `<name>/<layer.name>/...`.

    For checkpoints that nest a sublayer in a layer of its own (GPT-OSS's
    `router/router_dense/kernel`). Built by `SparseMoE` from a sublayer
    name containing `/`; it holds no variables of its own.
    """

    def __init__(self, layer, **kwargs):
        super().__init__(**kwargs)
        self.layer = layer

    def build(self, input_shape):
        self.layer.build(input_shape)

    def call(self, inputs):
        return self.layer(inputs)

    def compute_output_shape(self, input_shape):
        return self.layer.compute_output_shape(input_shape)


@keras.saving.register_keras_serializable(package="keras_nlp.layers")
class SparseMoE(keras.layers.Layer):
    """Top-k routed mixture of gated feed-forward experts.

    For each token `x` the router gives probabilities
    `p = softmax(x @ router)` over the experts; the `top_k` largest are
    kept (and, with `normalize_top_k`, divided by their sum) and the output
    is `sum_e p_e * output_e(act(gate_e(x)) * intermediate_e(x))` over the
    kept experts. With `routing="top_k_then_softmax"` the `top_k` largest
    logits are kept and `p` is their softmax. Routing runs in float32.

    Variable paths under the block's name (Mixtral's by default):
    `sparse_feedforward_gate_dense/kernel` `(hidden, experts)`, and
    `experts/expert_feedforward_gate_dense`,
    `experts/expert_feedforward_intermediate_dense`
    `(experts, hidden, intermediate_dim)` and
    `experts/expert_feedforward_output_dense`
    `(experts, intermediate_dim, hidden)`. `sublayer_names` renames them for
    other checkpoints; a router name with `/` nests the router's `Dense`
    in layers of those names (`"router/router_dense"`: `self.router` is a
    `NestedLayer` whose `layer` is the `Dense`).

    Args:
        num_experts: int. Number of experts.
        intermediate_dim: int. Feed-forward width of each expert.
        top_k: int. Experts per token, in `[1, num_experts]`.
        activation: str. Gate activation: a Keras activation name,
            `"gelu_approximate"`, or `"quick_gelu"` (`x * sigmoid(1.702 x)`,
            GPT-OSS). Defaults to `"silu"`.
        normalize_top_k: bool. Renormalize the kept probabilities to sum to
            one (Mixtral, Qwen 3 MoE by config). Defaults to `True`.
        fused_gate_intermediate: bool. One `gate` variable
            `(experts, hidden, 2 * intermediate_dim)` instead of separate
            gate and intermediate variables; see `fused_layout`.
        router_jitter_noise: float. In training, the block's input is
            multiplied by noise drawn uniformly from
            `[1 - noise, 1 + noise]` (router and experts both see it).
            Defaults to `0`.
        router_aux_loss_coef: float. In training, adds this times the
            Switch-Transformer load-balancing loss (fraction of tokens sent
            to each expert times its mean probability, summed, times
            `num_experts`; padding excluded) with `add_loss`. Defaults to
            `0`.
        kernel_initializer: initializer of the router and expert weights.
        sublayer_names: optional dict overriding the names (`router`,
            `experts`, `gate`, `intermediate`, `output`, `gate_bias`,
            `intermediate_bias`, `output_bias`), which are the variable
            paths.
        compute: `"sparse"` (each expert runs on its own tokens only;
            JAX's grouped matmul), `"dense"` (every expert on every token,
            unselected ones weighted 0) or `"auto"` (sparse on a JAX GPU or
            TPU, dense elsewhere; the default). Both paths give the same
            outputs and gradients; see the module docstring for the cost.
        routing: `"softmax_then_top_k"` (the default; Mixtral, Qwen MoE)
            or `"top_k_then_softmax"` (GPT-OSS): the kept experts' weights
            are the softmax of their logits, so they sum to one whatever
            `normalize_top_k` says.
        use_router_bias: bool. A bias `(experts,)` on the router. Defaults
            to `False`.
        use_expert_bias: bool. Per-expert biases on the gate (fused or
            not), intermediate and output projections. Defaults to
            `False`.
        fused_layout: `"concatenated"` (the gate's columns, then the
            intermediate's; Qwen 3 MoE) or `"interleaved"` (gate in the
            even columns, intermediate in the odd ones; GPT-OSS): how
            `fused_gate_intermediate`'s variable (and bias) holds the two.
            Defaults to `"concatenated"`.
        clamp_limit: float or `None`. If set, the gate is clipped above at
            it and the intermediate to `[-clamp_limit, clamp_limit]`
            before they combine (GPT-OSS: 7). Defaults to `None`.
        intermediate_offset: float. Added to the intermediate before it
            multiplies the activated gate (GPT-OSS: 1, with
            `activation="quick_gelu"`). Defaults to `0`.
        capacity_factor: float or `None`. If set, each expert computes at
            most `ceil(capacity_factor * tokens * top_k / num_experts)`
            (token, expert) pairs per call, in static shapes on any
            backend, and the pairs beyond are dropped (first choices are
            served first); see the module docstring. `None` (the default)
            drops nothing.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(batch, seq, hidden)`.
        padding_mask: optional `(batch, seq)`, non-zero for real tokens;
            only the auxiliary loss reads it.
        training: bool. Enables jitter noise and the auxiliary loss.

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers.sparse_moe import SparseMoE

    moe = SparseMoE(num_experts=4, intermediate_dim=16, top_k=2)
    outputs = moe(np.random.rand(2, 5, 8).astype("float32"))  # (2, 5, 8)
    ```
    """

    def __init__(
        self,
        num_experts,
        intermediate_dim,
        top_k=2,
        activation="silu",
        normalize_top_k=True,
        fused_gate_intermediate=False,
        router_jitter_noise=0.0,
        router_aux_loss_coef=0.0,
        kernel_initializer="glorot_uniform",
        sublayer_names=None,
        compute="auto",
        routing="softmax_then_top_k",
        use_router_bias=False,
        use_expert_bias=False,
        fused_layout="concatenated",
        clamp_limit=None,
        intermediate_offset=0.0,
        capacity_factor=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_expert_compute(compute, capacity_factor)
        for name, value, valid in (
            ("routing", routing, ROUTINGS),
            ("fused_layout", fused_layout, FUSED_LAYOUTS),
        ):
            if value not in valid:
                raise ValueError(
                    f"`{name}` must be one of {', '.join(map(repr, valid))}. "
                    f"Received: {name}={value!r}."
                )
        if fused_layout != "concatenated" and not fused_gate_intermediate:
            raise ValueError(
                f"`fused_layout={fused_layout!r}` lays out a fused "
                "gate/intermediate variable: it needs "
                "`fused_gate_intermediate=True`."
            )
        if clamp_limit is not None and not (
            _is_number(clamp_limit) and clamp_limit > 0
        ):
            raise ValueError(
                "`clamp_limit` must be a positive number or None. Received: "
                f"clamp_limit={clamp_limit!r}."
            )
        if not _is_number(intermediate_offset):
            raise ValueError(
                "`intermediate_offset` must be a number. Received: "
                f"intermediate_offset={intermediate_offset!r}."
            )
        for name, value in (
            ("num_experts", num_experts),
            ("intermediate_dim", intermediate_dim),
            ("top_k", top_k),
        ):
            if (
                not isinstance(value, int)
                or isinstance(value, bool)
                or value < 1
            ):
                raise ValueError(
                    f"`{name}` must be a positive integer. Received: "
                    f"{name}={value!r}."
                )
        if top_k > num_experts:
            raise ValueError(
                f"`top_k` must be at most `num_experts` ({num_experts}). "
                f"Received: top_k={top_k}."
            )
        if not 0 <= router_jitter_noise < 1:
            raise ValueError(
                "`router_jitter_noise` must be in [0, 1). Received: "
                f"router_jitter_noise={router_jitter_noise!r}."
            )
        unknown = set(sublayer_names or {}) - set(DEFAULT_SUBLAYER_NAMES)
        if unknown:
            raise ValueError(
                f"Unknown `sublayer_names` keys {sorted(unknown)}; valid "
                f"keys are {sorted(DEFAULT_SUBLAYER_NAMES)}."
            )
        for key, value in (sublayer_names or {}).items():
            if key == "router":
                valid = all(value.split("/"))
                expected = (
                    "one or more non-empty names joined by `/` (the router "
                    "nests in layers of the first names)"
                )
            else:
                valid = bool(value) and "/" not in value
                expected = "a non-empty name without `/`"
            if not valid:
                raise ValueError(
                    f"`sublayer_names[{key!r}]` must be {expected}. "
                    f"Received: {value!r}."
                )
        self.num_experts = num_experts
        self.intermediate_dim = intermediate_dim
        self.top_k = top_k
        self.activation = activation
        self.normalize_top_k = normalize_top_k
        self.fused_gate_intermediate = fused_gate_intermediate
        self.router_jitter_noise = router_jitter_noise
        self.router_aux_loss_coef = router_aux_loss_coef
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.sublayer_names = dict(sublayer_names or {})
        self.compute = compute
        self.routing = routing
        self.use_router_bias = use_router_bias
        self.use_expert_bias = use_expert_bias
        self.fused_layout = fused_layout
        self.clamp_limit = clamp_limit
        self.intermediate_offset = intermediate_offset
        self.capacity_factor = capacity_factor
        names = {**DEFAULT_SUBLAYER_NAMES, **self.sublayer_names}

        *scopes, router_name = names["router"].split("/")
        router = keras.layers.Dense(
            num_experts,
            use_bias=use_router_bias,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name=router_name,
        )
        declare_dims(router, kernel=ROUTER_DIMS, bias=("experts",))
        for scope in reversed(scopes):
            router = NestedLayer(router, dtype=self.dtype_policy, name=scope)
        self.router = router
        self.experts = ExpertBank(
            num_experts,
            intermediate_dim,
            activation=activation,
            fused_gate_intermediate=fused_gate_intermediate,
            kernel_initializer=self.kernel_initializer,
            variable_names=names,
            compute=compute,
            use_bias=use_expert_bias,
            fused_layout=fused_layout,
            clamp_limit=clamp_limit,
            intermediate_offset=intermediate_offset,
            capacity_factor=capacity_factor,
            dtype=self.dtype_policy,
            name=names["experts"],
        )
        # Like Dropout, only a noisy router owns random state.
        self.seed_generator = None
        if router_jitter_noise > 0:
            self.seed_generator = keras.random.SeedGenerator(name="jitter_seed")

    def build(self, input_shape):
        self.router.build(input_shape)
        self.experts.build(input_shape)

    def _routing(self, inputs):
        """Float32 router probabilities, and each token's top-k experts and
        their (float32) weights `(b, s, k)`."""
        logits = ops.cast(self.router(inputs), "float32")
        probabilities = ops.softmax(logits, axis=-1)
        if self.routing == "top_k_then_softmax":
            top_logits, top_indices = ops.top_k(logits, self.top_k)
            # A softmax over the kept logits; `top_k` sorts them, so the
            # first is the largest.
            top_weights = ops.exp(top_logits - top_logits[..., :1])
            top_weights = top_weights / ops.sum(
                top_weights, axis=-1, keepdims=True
            )
            return probabilities, top_indices, top_weights
        top_probabilities, top_indices = ops.top_k(probabilities, self.top_k)
        if self.normalize_top_k:
            top_probabilities = top_probabilities / ops.sum(
                top_probabilities, axis=-1, keepdims=True
            )
        return probabilities, top_indices, top_probabilities

    def _load_balancing_loss(self, probabilities, selected, padding_mask):
        """Switch-Transformer auxiliary loss, as Mixtral trains with it."""
        if padding_mask is None:
            padding_mask = ops.ones(ops.shape(probabilities)[:2])
        real = ops.cast(padding_mask, "float32")[..., None]
        count = ops.maximum(ops.sum(real), 1e-9)
        # Fraction of tokens routed to each expert, averaged over the k
        # choices, and the mean probability of each expert.
        tokens_per_expert = ops.sum(
            ops.mean(selected, axis=-2) * real, axis=(0, 1)
        )
        probability_per_expert = ops.sum(probabilities * real, axis=(0, 1))
        return (
            ops.sum(tokens_per_expert * probability_per_expert)
            / (count * count)
            * self.num_experts
        )

    def call(self, inputs, padding_mask=None, training=None):
        if training and self.router_jitter_noise > 0:
            noise = keras.random.uniform(
                ops.shape(inputs),
                minval=1.0 - self.router_jitter_noise,
                maxval=1.0 + self.router_jitter_noise,
                dtype=inputs.dtype,
                seed=self.seed_generator,
            )
            inputs = inputs * noise
        probabilities, top_indices, top_weights = self._routing(inputs)
        if training and self.router_aux_loss_coef:
            selected = ops.one_hot(
                top_indices, self.num_experts, dtype="float32"
            )
            self.add_loss(
                self.router_aux_loss_coef
                * self._load_balancing_loss(
                    probabilities, selected, padding_mask
                )
            )
        return self.experts(
            inputs, top_indices, ops.cast(top_weights, self.compute_dtype)
        )

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_experts": self.num_experts,
                "intermediate_dim": self.intermediate_dim,
                "top_k": self.top_k,
                "activation": self.activation,
                "normalize_top_k": self.normalize_top_k,
                "fused_gate_intermediate": self.fused_gate_intermediate,
                "router_jitter_noise": self.router_jitter_noise,
                "router_aux_loss_coef": self.router_aux_loss_coef,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "sublayer_names": self.sublayer_names,
                "compute": self.compute,
                "routing": self.routing,
                "use_router_bias": self.use_router_bias,
                "use_expert_bias": self.use_expert_bias,
                "fused_layout": self.fused_layout,
                "clamp_limit": self.clamp_limit,
                "intermediate_offset": self.intermediate_offset,
                "capacity_factor": self.capacity_factor,
            }
        )
        return config


def configure_experts(model, compute="auto", capacity_factor=None):
    """Sets how every `SparseMoE` block of `model` computes its experts.

    Weights and outputs are unchanged (up to float rounding) unless
    `capacity_factor` drops pairs. Call it before the model's first
    forward pass, training step or `compile`: functions Keras has already
    traced keep the old compute.

    Args:
        model: a Keras model or layer, e.g. a `MixtralBackbone`.
        compute: `"auto"`, `"sparse"` or `"dense"`, as in `SparseMoE`.
        capacity_factor: float or `None`, as in `SparseMoE`.

    Returns:
        The number of blocks changed.

    Example:

    ```python
    from keras_nlp.layers.sparse_moe import configure_experts
    from keras_nlp.models import MixtralBackbone

    backbone = MixtralBackbone(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=2,
        hidden_dim=32,
        intermediate_dim=48,
        num_experts=4,
    )
    configure_experts(backbone, capacity_factor=1.25)  # 2 blocks
    ```
    """
    check_expert_compute(compute, capacity_factor)
    blocks = [
        layer
        for layer in model._flatten_layers(include_self=True)
        if isinstance(layer, SparseMoE)
    ]
    if not blocks:
        raise ValueError(
            f"{type(model).__name__} {model.name!r} has no SparseMoE block "
            "to configure."
        )
    for block in blocks:
        for layer in (block, block.experts):
            layer.compute = compute
            layer.capacity_factor = capacity_factor
    return len(blocks)
