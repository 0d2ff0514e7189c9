"""A sparse mixture of experts plus an always-on, gated shared expert.

Qwen 1.5 / Qwen 2 MoE: every token goes through its `top_k` routed experts
and through one dense SwiGLU, the shared expert, whose output is scaled
per token by `sigmoid(x @ shared_expert_gate)` before the two are added.
"""

import keras
from keras import ops

from keras_nlp.layers.common import check_positive_ints
from keras_nlp.layers.common import check_sublayer_keys
from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.gated_feedforward import GatedFeedForward
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.layers.layout_rules import sparse_moe_rules
from keras_nlp.layers.moe_options import check_sublayer_names
from keras_nlp.layers.sparse_moe import DEFAULT_SUBLAYER_NAMES
from keras_nlp.layers.sparse_moe import SparseMoE

SHARED_EXPERT = "shared_expert_dense"
SHARED_EXPERT_GATE = "shared_expert_gate_dense"
# The `sublayer_names` keys of the shared expert and its gate, beside
# `SparseMoE`'s.
SHARED_SUBLAYER_NAMES = {
    "shared_expert": SHARED_EXPERT,
    "shared_expert_gate": SHARED_EXPERT_GATE,
}
# The shared expert's gate maps hidden to one logit per token.
SHARED_EXPERT_GATE_DIMS = ("hidden", "shared_expert_logit")


def _split_names(sublayer_names):
    """`(SparseMoE's names, the shared expert's)` of `sublayer_names`."""
    routed = dict(sublayer_names or {})
    shared = {k: routed.pop(k) for k in SHARED_SUBLAYER_NAMES if k in routed}
    return routed, shared


@keras.saving.register_keras_serializable(package="keras_nlp.layers")
class SharedExpertSparseMoE(SparseMoE):
    """`SparseMoE` plus a shared SwiGLU expert that every token uses.

    The output is `moe(x) + sigmoid(x @ g) * shared(x)`, where `moe` is the
    routed mixture of `SparseMoE`, `shared` a `GatedFeedForward` of width
    `shared_intermediate_dim` and `g` a `(hidden, 1)` kernel.

    Variable paths under the block's name: those of `SparseMoE`, plus
    `shared_expert_dense/feedforward_{intermediate,gate}_dense/kernel`
    `(hidden, shared_intermediate_dim)`,
    `shared_expert_dense/feedforward_output_dense/kernel`
    `(shared_intermediate_dim, hidden)` and
    `shared_expert_gate_dense/kernel` `(hidden, 1)`, as in the Qwen MoE
    checkpoints.

    Args:
        num_experts: int. Number of routed experts.
        intermediate_dim: int. Feed-forward width of each routed expert.
        shared_intermediate_dim: int. Feed-forward width of the shared
            expert.
        sublayer_names: optional dict overriding `SparseMoE`'s names and
            those of the shared expert (`shared_expert`, default
            `shared_expert_dense`) and of its gate (`shared_expert_gate`,
            default `shared_expert_gate_dense`): their variables' path
            segments. Qwen 3.5 MoE's are `shared_expert` and
            `shared_expert_gate`.
        **kwargs: the other arguments of `SparseMoE` (`top_k`,
            `normalize_top_k`, `fused_gate_intermediate`,
            `router_aux_loss_coef`, ...) and of `keras.layers.Layer`.
            Jitter noise, if any, reaches only the routed experts.

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers import SharedExpertSparseMoE

    moe = SharedExpertSparseMoE(
        num_experts=4,
        intermediate_dim=16,
        shared_intermediate_dim=32,
        top_k=2,
        normalize_top_k=False,
    )
    outputs = moe(np.random.rand(2, 5, 8).astype("float32"))  # (2, 5, 8)
    ```
    """

    def __init__(
        self,
        num_experts,
        intermediate_dim,
        shared_intermediate_dim,
        sublayer_names=None,
        **kwargs,
    ):
        # Every valid key in one message, the routed experts' too.
        check_sublayer_keys(
            sublayer_names, {**DEFAULT_SUBLAYER_NAMES, **SHARED_SUBLAYER_NAMES}
        )
        routed, shared = _split_names(sublayer_names)
        check_sublayer_names(shared, SHARED_SUBLAYER_NAMES)
        super().__init__(
            num_experts, intermediate_dim, sublayer_names=routed, **kwargs
        )
        # One dict in the config, as given.
        self.sublayer_names.update(shared)
        names = {**SHARED_SUBLAYER_NAMES, **shared}
        check_positive_ints(shared_intermediate_dim=shared_intermediate_dim)
        self.shared_intermediate_dim = shared_intermediate_dim
        self.shared_expert = GatedFeedForward(
            shared_intermediate_dim,
            activation=self.activation,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name=names["shared_expert"],
        )
        self.shared_expert_gate = named_dense(
            1,
            SHARED_EXPERT_GATE_DIMS,
            name=names["shared_expert_gate"],
            use_bias=False,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
        )

    def build(self, input_shape):
        super().build(input_shape)
        self.shared_expert.build(input_shape)
        self.shared_expert_gate.build(input_shape)

    def call(self, inputs, padding_mask=None, training=None):
        routed = super().call(
            inputs, padding_mask=padding_mask, training=training
        )
        shared = self.shared_expert(inputs) * ops.sigmoid(
            self.shared_expert_gate(inputs)
        )
        return routed + shared

    def get_config(self):
        config = super().get_config()
        config["shared_intermediate_dim"] = self.shared_intermediate_dim
        return config


def shared_expert_moe_rules(
    prefix,
    fused_gate_intermediate=False,
    sublayer_names=None,
):
    """Layout rules of a `SharedExpertSparseMoE` under `prefix` (with `/`).

    The routed experts as `sparse_moe_rules` places them; the shared expert
    like a dense feed-forward (width on the model axis, hidden on the data
    axis). Its gate `(hidden, 1)` is declared replicated, as the router is:
    one hidden-sized vector per block that every token reads, where
    sharding hidden would add a collective per block to save a few
    kilobytes. `sublayer_names` are the layer's, when it renames its
    sublayers (the shared expert's included).
    """
    routed, shared = _split_names(sublayer_names)
    names = {**SHARED_SUBLAYER_NAMES, **shared}
    return [
        *sparse_moe_rules(
            prefix,
            sublayer_names=routed,
            fused_gate_intermediate=fused_gate_intermediate,
        ),
        *feedforward_rules(prefix + names["shared_expert"] + "/"),
        named_rule(
            prefix + names["shared_expert_gate"] + "/kernel",
            SHARED_EXPERT_GATE_DIMS,
            {},
        ),
    ]
