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
"""

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.layers.decoder_layer import get_activation

# What each dimension of the expert weights and the router kernel is.
EXPERT_INPUT_DIMS = ("experts", "hidden", "ffw")
EXPERT_OUTPUT_DIMS = ("experts", "ffw", "hidden")
ROUTER_DIMS = ("hidden", "experts")

DEFAULT_SUBLAYER_NAMES = {
    "router": "sparse_feedforward_gate_dense",
    "experts": "experts",
    "gate": "expert_feedforward_gate_dense",
    "intermediate": "expert_feedforward_intermediate_dense",
    "output": "expert_feedforward_output_dense",
}


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
    `(experts, hidden, 2 * intermediate_dim)` holds the gate then the
    intermediate projection (Qwen 3 MoE).

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
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.compute = compute
        self.num_experts = num_experts
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.fused_gate_intermediate = fused_gate_intermediate
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.variable_names = {
            **DEFAULT_SUBLAYER_NAMES,
            **(variable_names or {}),
        }
        self._activation = get_activation(activation)
        names = self.variable_names
        declare_dims(
            self,
            **{
                names["gate"]: EXPERT_INPUT_DIMS,
                names["intermediate"]: EXPERT_INPUT_DIMS,
                names["output"]: EXPERT_OUTPUT_DIMS,
            },
        )

    def _weight(self, shape, kind):
        return self.add_weight(
            shape=shape,
            initializer=self.kernel_initializer,
            dtype=self.variable_dtype,
            name=self.variable_names[kind],
        )

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        experts, width = self.num_experts, self.intermediate_dim
        if self.fused_gate_intermediate:
            self.gate = self._weight((experts, hidden_dim, 2 * width), "gate")
            self.intermediate = None
        else:
            self.gate = self._weight((experts, hidden_dim, width), "gate")
            self.intermediate = self._weight(
                (experts, hidden_dim, width), "intermediate"
            )
        self.output_kernel = self._weight(
            (experts, width, hidden_dim), "output"
        )

    def _gated(self, gate, intermediate):
        # Like DecoderLayer, the gate's activation runs in float32.
        gate = ops.cast(
            self._activation(ops.cast(gate, "float32")), self.compute_dtype
        )
        return intermediate * gate

    def call(self, inputs, top_indices, top_weights):
        """`(batch, seq, hidden)` inputs; each token's `top_k` experts
        `(batch, seq, k)` and their weights `(batch, seq, k)`."""
        if _use_sparse(self.compute):
            return self._sparse(inputs, top_indices, top_weights)
        return self._dense(inputs, top_indices, top_weights)

    def _dense(self, inputs, top_indices, top_weights):
        selected = ops.one_hot(top_indices, self.num_experts, dtype="float32")
        routing_weights = ops.cast(
            ops.sum(selected * ops.cast(top_weights, "float32")[..., None], -2),
            self.compute_dtype,
        )
        gate = ops.einsum("bsh,ehf->bsef", inputs, self.gate)
        if self.intermediate is None:
            gate, intermediate = ops.split(gate, 2, axis=-1)
        else:
            intermediate = ops.einsum(
                "bsh,ehf->bsef", inputs, self.intermediate
            )
        # Weighting before the output projection lets one einsum contract
        # both the expert and the feed-forward dimension.
        hidden = self._gated(gate, intermediate) * routing_weights[..., None]
        return ops.einsum("bsef,efh->bsh", hidden, self.output_kernel)

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
        rows = ops.take(tokens, token_of_row, axis=0)
        group_sizes = bincount(experts, length=self.num_experts)
        gate = ragged_dot(rows, self.gate.value, group_sizes)
        if self.intermediate is None:
            gate, intermediate = ops.split(gate, 2, axis=-1)
        else:
            intermediate = ragged_dot(
                rows, self.intermediate.value, group_sizes
            )
        hidden = self._gated(gate, intermediate)
        outputs = ragged_dot(hidden, self.output_kernel.value, group_sizes)
        weights = ops.take(ops.reshape(top_weights, (-1,)), order)
        outputs = outputs * ops.cast(weights, outputs.dtype)[:, None]
        outputs = ops.segment_sum(
            outputs, token_of_row, num_segments=batch * length
        )
        return ops.reshape(outputs, (batch, length, hidden_dim))

    def compute_output_shape(self, input_shape):
        return input_shape


@keras.saving.register_keras_serializable(package="keras_nlp.layers")
class SparseMoE(keras.layers.Layer):
    """Top-k routed mixture of gated feed-forward experts.

    For each token `x` the router gives probabilities
    `p = softmax(x @ router)` over the experts; the `top_k` largest are
    kept (and, with `normalize_top_k`, divided by their sum) and the output
    is `sum_e p_e * output_e(act(gate_e(x)) * intermediate_e(x))` over the
    kept experts. Routing runs in float32.

    Variable paths under the block's name (Mixtral's by default):
    `sparse_feedforward_gate_dense/kernel` `(hidden, experts)`, and
    `experts/expert_feedforward_gate_dense`,
    `experts/expert_feedforward_intermediate_dense`
    `(experts, hidden, intermediate_dim)` and
    `experts/expert_feedforward_output_dense`
    `(experts, intermediate_dim, hidden)`. `sublayer_names` renames them for
    other checkpoints.

    Args:
        num_experts: int. Number of experts.
        intermediate_dim: int. Feed-forward width of each expert.
        top_k: int. Experts per token, in `[1, num_experts]`.
        activation: str. Gate activation. Defaults to `"silu"`.
        normalize_top_k: bool. Renormalize the kept probabilities to sum to
            one (Mixtral, Qwen 3 MoE by config). Defaults to `True`.
        fused_gate_intermediate: bool. One `gate` variable
            `(experts, hidden, 2 * intermediate_dim)`, gate half first,
            instead of separate gate and intermediate variables.
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
            `experts`, `gate`, `intermediate`, `output`), which are the
            variable paths.
        compute: `"sparse"` (each expert runs on its own tokens only;
            JAX's grouped matmul), `"dense"` (every expert on every token,
            unselected ones weighted 0) or `"auto"` (sparse on a JAX GPU or
            TPU, dense elsewhere; the default). Both paths give the same
            outputs and gradients; see the module docstring for the cost.
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
        **kwargs,
    ):
        super().__init__(**kwargs)
        if compute not in ("auto", "sparse", "dense"):
            raise ValueError(
                "`compute` must be 'auto', 'sparse' or 'dense'. Received: "
                f"compute={compute!r}."
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
        names = {**DEFAULT_SUBLAYER_NAMES, **self.sublayer_names}

        self.router = keras.layers.Dense(
            num_experts,
            use_bias=False,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name=names["router"],
        )
        declare_dims(self.router, kernel=ROUTER_DIMS)
        self.experts = ExpertBank(
            num_experts,
            intermediate_dim,
            activation=activation,
            fused_gate_intermediate=fused_gate_intermediate,
            kernel_initializer=self.kernel_initializer,
            variable_names=names,
            compute=compute,
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
            }
        )
        return config
