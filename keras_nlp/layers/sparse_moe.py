"""Sparse mixture-of-experts feed-forward (Mixtral, Qwen-MoE style).

The block is a drop-in `feedforward` for `DecoderBlock`: a router picks the
top-k experts of each token and the block returns the routing-weighted sum
of their gated feed-forwards, which an `ExpertBank` holds and computes
(`keras_nlp/layers/expert_bank.py`: sparse, dense or capacity-bounded
compute, and what each costs). `configure_experts` switches the compute of
the blocks of a built model.

Options cover the checkpoints' variants: routing by softmax then top-k
(Mixtral, Qwen MoE) or top-k logits then a softmax over the kept ones
(GPT-OSS), a router bias, per-expert biases, a fused gate/intermediate
weight laid out in halves (Qwen 3 MoE) or interleaved (GPT-OSS), and
GPT-OSS's clamped gated unit.
"""

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.layers.expert_bank import DEFAULT_VARIABLE_NAMES
from keras_nlp.layers.expert_bank import ExpertBank
from keras_nlp.layers.moe_options import check_expert_compute
from keras_nlp.layers.moe_options import check_expert_counts
from keras_nlp.layers.moe_options import check_gated_unit
from keras_nlp.layers.moe_options import check_routing
from keras_nlp.layers.moe_options import check_sublayer_names

# What each dimension of the router kernel is.
ROUTER_DIMS = ("hidden", "experts")

DEFAULT_SUBLAYER_NAMES = {
    "router": "sparse_feedforward_gate_dense",
    "experts": "experts",
    **DEFAULT_VARIABLE_NAMES,
}


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
            outputs and gradients; see `expert_bank` for the cost.
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
            served first); see `expert_bank`. `None` (the default)
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
        check_routing(routing, router_jitter_noise)
        check_gated_unit(
            fused_gate_intermediate,
            fused_layout,
            clamp_limit,
            intermediate_offset,
        )
        check_expert_counts(num_experts, intermediate_dim, top_k)
        check_sublayer_names(sublayer_names, DEFAULT_SUBLAYER_NAMES)
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
        self.router = self._router(names["router"])
        self.experts = self._expert_bank(names)
        # Like Dropout, only a noisy router owns random state.
        self.seed_generator = None
        if router_jitter_noise > 0:
            self.seed_generator = keras.random.SeedGenerator(name="jitter_seed")

    def _router(self, path):
        """The router `Dense`, nested in layers named by `path`'s first
        segments (`"router/router_dense"`: a `NestedLayer` named `router`
        around a `Dense` named `router_dense`)."""
        *scopes, name = path.split("/")
        router = keras.layers.Dense(
            self.num_experts,
            use_bias=self.use_router_bias,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name=name,
        )
        declare_dims(router, kernel=ROUTER_DIMS, bias=("experts",))
        for scope in reversed(scopes):
            router = NestedLayer(router, dtype=self.dtype_policy, name=scope)
        return router

    def _expert_bank(self, names):
        return ExpertBank(
            self.num_experts,
            self.intermediate_dim,
            activation=self.activation,
            fused_gate_intermediate=self.fused_gate_intermediate,
            kernel_initializer=self.kernel_initializer,
            variable_names=names,
            compute=self.compute,
            use_bias=self.use_expert_bias,
            fused_layout=self.fused_layout,
            clamp_limit=self.clamp_limit,
            intermediate_offset=self.intermediate_offset,
            capacity_factor=self.capacity_factor,
            dtype=self.dtype_policy,
            name=names["experts"],
        )

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
