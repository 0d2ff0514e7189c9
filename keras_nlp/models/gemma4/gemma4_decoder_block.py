"""One Gemma 4 decoder block: attention, a GeGLU feed-forward in parallel
with an optional mixture of experts, and an optional per-layer input."""

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.distribution.dims import declare_einsum_dims
from keras_nlp.distribution.layout_map import pin_input
from keras_nlp.layers.cached_attention import decoder_attention_mask
from keras_nlp.layers.common import TakesLayers
from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.expert_bank import ExpertBank
from keras_nlp.layers.fused_projection import project_together
from keras_nlp.layers.sparse_moe import ROUTER_DIMS
from keras_nlp.models.gemma.gemma_decoder_block import FEEDFORWARD_NAMES
from keras_nlp.models.gemma4.gemma4_attention import unit_rms

# keras-hub's names of the expert weights (its checkpoint paths).
EXPERT_NAMES = {
    "gate": "gate_proj",
    "intermediate": "up_proj",
    "output": "down_proj",
}
# The per-layer input's kernels: hidden states to the per-layer width and
# back.
PER_LAYER_GATE_DIMS = ("hidden", "per_layer")
PER_LAYER_UP_DIMS = ("per_layer", "hidden")


class Gemma4ExpertBank(ExpertBank):
    """`ExpertBank` of tanh-GELU experts with a learned scale per expert,
    `per_expert_scale` `(experts,)`, on each expert's output."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        declare_dims(self, per_expert_scale=("experts",))

    def build(self, input_shape):
        super().build(input_shape)
        self.per_expert_scale = self.add_weight(
            shape=(self.num_experts,),
            initializer="ones",
            dtype=self.variable_dtype,
            name="per_expert_scale",
        )

    def call(self, inputs, top_indices, top_weights):
        # An expert's scale multiplies its output, hence its weight.
        scale = ops.take(self.per_expert_scale, top_indices, axis=0)
        return super().call(
            inputs, top_indices, top_weights * ops.cast(scale, inputs.dtype)
        )


class Gemma4Router(keras.layers.Layer):
    """Gemma 4's router: each token's `top_k` experts and their weights.

    The hidden states are RMS-normalized without a scale, multiplied by
    `hidden ** -0.5` and by the learned `per_dim_scale` `(hidden,)`, and
    projected to one logit per expert (`proj`); the softmax's `top_k`
    largest probabilities are renormalized to sum to one.

    Returns:
        `(top_indices, top_weights)`, each `(batch, seq, top_k)`.
    """

    def __init__(self, num_experts, top_k, layer_norm_epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.num_experts = num_experts
        self.top_k = top_k
        self.layer_norm_epsilon = layer_norm_epsilon
        self.proj = named_dense(
            num_experts,
            ROUTER_DIMS,
            name="proj",
            use_bias=False,
            dtype=self.dtype_policy,
        )

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        self.per_dim_scale = self.add_weight(
            shape=(hidden_dim,),
            initializer="ones",
            dtype=self.variable_dtype,
            name="per_dim_scale",
        )
        self.proj.build(input_shape)

    def call(self, inputs):
        hidden_dim = ops.shape(inputs)[-1]
        x = unit_rms(inputs, self.layer_norm_epsilon)
        x = x * ops.cast(ops.rsqrt(float(hidden_dim)), x.dtype)
        x = x * ops.cast(self.per_dim_scale, x.dtype)
        probabilities = ops.softmax(ops.cast(self.proj(x), "float32"), axis=-1)
        top_weights, top_indices = ops.top_k(probabilities, k=self.top_k)
        top_weights = top_weights / ops.maximum(
            ops.sum(top_weights, axis=-1, keepdims=True), 1e-9
        )
        return top_indices, ops.cast(top_weights, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_experts": self.num_experts,
                "top_k": self.top_k,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config


class Gemma4DecoderBlock(TakesLayers, keras.layers.Layer):
    """Gemma 4's decoder block.

    Computes

        h = x + post_attention_norm(attention(pre_attention_norm(x)))
        f = post_ffw_norm_dense(ffw(pre_ffw_norm(h)))
            + post_ffw_norm_moe_path(experts(pre_ffw_norm_moe(h)))
        y = h + post_ffw_norm(f)

    (without experts, `f = ffw(pre_ffw_norm(h))`), then, with a per-layer
    input `p`, `y += post_per_layer_input_norm(per_layer_up_proj(
    gelu(per_layer_input_gate(y)) * p))`, and finally `y *= layer_scalar`
    (a non-trainable scalar). `ffw(z) = ffw_linear(gelu(ffw_gating(z)) *
    ffw_gating_2(z))` with tanh-GELU; every norm is an RMS norm `x *
    scale`. The router reads `h` itself (see `Gemma4Router`).

    Args:
        attention: a `Gemma4Attention` named `attention`.
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of each feed-forward branch.
        layer_norm_epsilon: float. Epsilon of every normalization.
        num_experts: int or `None`. Experts of the parallel mixture (none
            without). Defaults to `None`.
        expert_intermediate_dim: int or `None`. Each expert's width.
        num_experts_per_token: int. Experts per token. Defaults to `8`.
        hidden_size_per_layer_input: int. Width of the per-layer input;
            `0` for none. Defaults to `0`.
        dropout: float. Dropout on the two branches' outputs.
        **kwargs: forwarded to `keras.layers.Layer`.

    Call arguments:
        inputs: `(batch, seq, hidden_dim)`.
        padding_mask: optional `(batch, key_len)`, non-zero for real keys.
        cache, cache_update_index, positions: as `Gemma4Attention`'s.
        per_layer_input: `(batch, seq, hidden_size_per_layer_input)` when
            the block has a per-layer input.
        shared_key_value: the `(keys, values)` of an earlier block, for a
            block whose attention shares them.
        return_key_value: bool. Also return the attended keys and values.
        training: bool.

    Returns:
        The outputs; with a cache `(outputs, cache)`; with
        `return_key_value`, `(outputs, keys, values)` (and the cache last).
    """

    layer_arguments = ("attention",)

    def __init__(
        self,
        attention,
        hidden_dim,
        intermediate_dim,
        layer_norm_epsilon=1e-6,
        num_experts=None,
        expert_intermediate_dim=None,
        num_experts_per_token=8,
        hidden_size_per_layer_input=0,
        dropout=0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.layer_norm_epsilon = layer_norm_epsilon
        self.num_experts = num_experts
        self.expert_intermediate_dim = expert_intermediate_dim
        self.num_experts_per_token = num_experts_per_token
        self.hidden_size_per_layer_input = hidden_size_per_layer_input
        self.dropout = dropout
        self.attention = attention

        def norm(name):
            return keras.layers.RMSNormalization(
                epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name=name
            )

        def dense(equation, width, name):
            layer = keras.layers.EinsumDense(
                equation,
                output_shape=(None, width),
                dtype=self.dtype_policy,
                name=name,
            )
            return declare_einsum_dims(layer, d="hidden", f="ffw")

        names = FEEDFORWARD_NAMES
        self.pre_attention_norm = norm("pre_attention_norm")
        self.post_attention_norm = norm("post_attention_norm")
        self.pre_ffw_norm = norm("pre_ffw_norm")
        self.post_ffw_norm = norm("post_ffw_norm")
        self.gating_ffw = dense("btd,df->btf", intermediate_dim, names["gate"])
        self.gating_ffw_2 = dense(
            "btd,df->btf", intermediate_dim, names["intermediate"]
        )
        self.ffw_linear = dense("btf,fd->btd", hidden_dim, names["output"])
        self.moe_router = None
        if num_experts:
            self.pre_ffw_norm_moe = norm("pre_ffw_norm_moe")
            self.post_ffw_norm_dense = norm("post_ffw_norm_dense")
            self.post_ffw_norm_moe_path = norm("post_ffw_norm_moe_path")
            self.moe_router = Gemma4Router(
                num_experts,
                num_experts_per_token,
                layer_norm_epsilon,
                dtype=self.dtype_policy,
                name="moe_router",
            )
            self.moe_expert_bank = Gemma4ExpertBank(
                num_experts,
                expert_intermediate_dim,
                activation="gelu_approximate",
                variable_names=EXPERT_NAMES,
                dtype=self.dtype_policy,
                name="moe_expert_bank",
            )
        if hidden_size_per_layer_input:
            self.per_layer_input_gate = named_dense(
                hidden_size_per_layer_input,
                PER_LAYER_GATE_DIMS,
                name="per_layer_input_gate",
                use_bias=False,
                dtype=self.dtype_policy,
            )
            self.per_layer_up_proj = named_dense(
                hidden_dim,
                PER_LAYER_UP_DIMS,
                name="per_layer_up_proj",
                use_bias=False,
                dtype=self.dtype_policy,
            )
            self.post_per_layer_input_norm = norm("post_per_layer_input_norm")
        self.branch_dropout = keras.layers.Dropout(
            rate=dropout, dtype=self.dtype_policy, name="dropout"
        )

    def build(self, input_shape):
        # keras-hub's creation order (the layer scalar first).
        self.layer_scalar = self.add_weight(
            shape=(),
            initializer="ones",
            trainable=False,
            dtype=self.variable_dtype,
            name="layer_scalar",
        )
        for layer in (
            self.pre_attention_norm,
            self.post_attention_norm,
            self.attention,
            self.pre_ffw_norm,
            self.post_ffw_norm,
            self.gating_ffw,
            self.gating_ffw_2,
        ):
            layer.build(input_shape)
        self.ffw_linear.build((*input_shape[:-1], self.intermediate_dim))
        if self.moe_router is not None:
            for layer in (
                self.pre_ffw_norm_moe,
                self.post_ffw_norm_dense,
                self.post_ffw_norm_moe_path,
                self.moe_router,
                self.moe_expert_bank,
            ):
                layer.build(input_shape)
        if self.hidden_size_per_layer_input:
            self.per_layer_input_gate.build(input_shape)
            self.per_layer_up_proj.build(
                (*input_shape[:-1], self.hidden_size_per_layer_input)
            )
            self.post_per_layer_input_norm.build(input_shape)

    def _feedforward(self, x):
        gate, up = project_together(x, [self.gating_ffw, self.gating_ffw_2])
        x = keras.activations.gelu(gate, approximate=True) * up
        return self.ffw_linear(pin_input(self.ffw_linear, x))

    def call(
        self,
        inputs,
        padding_mask=None,
        cache=None,
        cache_update_index=None,
        positions=None,
        per_layer_input=None,
        shared_key_value=None,
        return_key_value=False,
        training=None,
    ):
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        if shared_key_value is not None:
            key_length = ops.shape(shared_key_value[0])[1]
        elif cache is not None:
            key_length = ops.shape(cache)[2]
        else:
            key_length = length
        mask = decoder_attention_mask(
            batch,
            length,
            key_length,
            padding_mask=padding_mask,
            start_index=0 if cache_update_index is None else cache_update_index,
        )
        x, (key, value), cache = self.attention(
            self.pre_attention_norm(inputs),
            attention_mask=mask,
            cache=cache,
            cache_update_index=cache_update_index,
            positions=positions,
            shared_key_value=shared_key_value,
            training=training,
        )
        x = self.branch_dropout(self.post_attention_norm(x), training=training)
        residual = inputs + x

        x = self._feedforward(self.pre_ffw_norm(residual))
        if self.moe_router is not None:
            top_indices, top_weights = self.moe_router(residual)
            experts = self.moe_expert_bank(
                self.pre_ffw_norm_moe(residual), top_indices, top_weights
            )
            x = self.post_ffw_norm_dense(x) + self.post_ffw_norm_moe_path(
                experts
            )
        x = self.branch_dropout(self.post_ffw_norm(x), training=training)
        outputs = residual + x

        if self.hidden_size_per_layer_input:
            gated = keras.activations.gelu(
                self.per_layer_input_gate(outputs), approximate=True
            )
            gated = self.per_layer_up_proj(
                gated * ops.cast(per_layer_input, gated.dtype)
            )
            outputs = outputs + self.post_per_layer_input_norm(gated)
        outputs = outputs * ops.cast(self.layer_scalar, outputs.dtype)

        results = (outputs,)
        if return_key_value:
            results += (key, value)
        if cache is not None:
            results += (cache,)
        return results[0] if len(results) == 1 else results

    def compute_output_spec(
        self,
        inputs,
        cache=None,
        shared_key_value=None,
        return_key_value=False,
        **kwargs,
    ):
        # Written out: tracing the call on Keras's symbolic tensors would
        # take a scaled embedding for a sparse one (Keras 3.15).
        del kwargs
        results = (keras.KerasTensor(inputs.shape, dtype=self.compute_dtype),)
        if return_key_value:
            if shared_key_value is not None:
                key, value = shared_key_value
                results += (
                    keras.KerasTensor(key.shape, dtype=key.dtype),
                    keras.KerasTensor(value.shape, dtype=value.dtype),
                )
            else:
                attention = self.attention
                shape = (
                    inputs.shape[0],
                    None if cache is not None else inputs.shape[1],
                    attention.num_key_value_heads,
                    attention.head_dim
                    or self.hidden_dim // attention.num_query_heads,
                )
                # Two tensors: Keras tells outputs apart by identity.
                results += tuple(
                    keras.KerasTensor(shape, dtype=self.compute_dtype)
                    for _ in range(2)
                )
        if cache is not None:
            results += (keras.KerasTensor(cache.shape, dtype=cache.dtype),)
        return results[0] if len(results) == 1 else results

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "attention": keras.saving.serialize_keras_object(
                    self.attention
                ),
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "num_experts": self.num_experts,
                "expert_intermediate_dim": self.expert_intermediate_dim,
                "num_experts_per_token": self.num_experts_per_token,
                "hidden_size_per_layer_input": (
                    self.hidden_size_per_layer_input
                ),
                "dropout": self.dropout,
            }
        )
        return config
