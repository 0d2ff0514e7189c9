"""Qwen 3.5's decoder block: full or linear attention, then a feed-forward."""

import keras
from keras import ops

from keras_nlp.distribution.layout_map import pin_input
from keras_nlp.layers.cached_attention import decoder_attention_mask
from keras_nlp.layers.common import FEEDFORWARD_INPUT_DIMS
from keras_nlp.layers.common import FEEDFORWARD_OUTPUT_DIMS
from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.fused_projection import project_together
from keras_nlp.layers.gated_delta_net import GatedDeltaNet
from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)

LAYER_TYPES = ("full_attention", "linear_attention")
# The token mixer's name in each kind of block (its variables' paths).
MIXER_NAMES = {
    "full_attention": "self_attention",
    "linear_attention": "linear_attn",
}
FEEDFORWARD_NAMES = {
    "intermediate": "feedforward_intermediate_dense",
    "gate": "feedforward_gate_dense",
    "output": "feedforward_output_dense",
}


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class Qwen3_5DecoderBlock(keras.layers.Layer):
    """A pre-norm block: `h = x + mixer(norm(x))`, `y = h + ffw(norm(h))`.

    The mixer is a `CachedGroupedQueryAttention` with a gated query (full
    attention, named `self_attention`) or a `GatedDeltaNet` (linear
    attention, named `linear_attn`); the norms are `input_layernorm` and
    `post_attention_layernorm` (`1 + scale` gains). The feed-forward is a
    SwiGLU of width `intermediate_dim` (`feedforward_gate_dense`,
    `feedforward_intermediate_dense`, `feedforward_output_dense`) or the
    given `feedforward` layer (a mixture of experts).

    Args:
        mixer: the token mixer layer.
        hidden_dim: int.
        intermediate_dim: int or `None` (with `feedforward`).
        feedforward: optional layer replacing the SwiGLU.
        layer_norm_epsilon: float.
        dropout: float, on the mixer's output.
        kernel_initializer: initializer of the SwiGLU's kernels.
        **kwargs: forwarded to `keras.layers.Layer`.

    Call arguments:
        inputs: `(batch, seq, hidden)`.
        padding_mask: optional `(batch, seq)` (`(batch, cache length)` for
            full attention with a cache).
        cache: optional: the attention's key/value cache, or the linear
            attention's `(conv_state, state)`. The call then returns
            `(outputs, cache)`.
        cache_update_index: position of the first input token.
        positions: optional `(batch, seq)` rotary positions.
    """

    def __init__(
        self,
        mixer,
        hidden_dim,
        intermediate_dim=None,
        feedforward=None,
        layer_norm_epsilon=1e-6,
        dropout=0.0,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.mixer = mixer
        self.is_linear = isinstance(mixer, GatedDeltaNet)
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.feedforward = feedforward
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.input_layernorm = ZeroCenteredRMSNormalization(
            epsilon=layer_norm_epsilon,
            dtype=self.dtype_policy,
            name="input_layernorm",
        )
        self.post_attention_layernorm = ZeroCenteredRMSNormalization(
            epsilon=layer_norm_epsilon,
            dtype=self.dtype_policy,
            name="post_attention_layernorm",
        )
        self.mixer_dropout = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="self_attention_dropout"
        )
        if feedforward is None:

            def dense(width, dims, kind):
                return named_dense(
                    width,
                    dims,
                    name=FEEDFORWARD_NAMES[kind],
                    use_bias=False,
                    kernel_initializer=self.kernel_initializer,
                    dtype=self.dtype_policy,
                )

            self.gate_dense = dense(
                intermediate_dim, FEEDFORWARD_INPUT_DIMS, "gate"
            )
            self.intermediate_dense = dense(
                intermediate_dim, FEEDFORWARD_INPUT_DIMS, "intermediate"
            )
            self.output_dense = dense(
                hidden_dim, FEEDFORWARD_OUTPUT_DIMS, "output"
            )

    @property
    def attention(self):
        """The full attention (its key/value cache is planned), or `None`
        in a linear attention block."""
        return None if self.is_linear else self.mixer

    def build(self, input_shape):
        self.input_layernorm.build(input_shape)
        self.mixer.build(input_shape)
        self.post_attention_layernorm.build(input_shape)
        if self.feedforward is not None:
            self.feedforward.build(input_shape)
            return
        self.gate_dense.build(input_shape)
        self.intermediate_dense.build(input_shape)
        self.output_dense.build((*input_shape[:-1], self.intermediate_dim))

    def _feedforward(self, x, padding_mask):
        if self.feedforward is not None:
            return self.feedforward(x, padding_mask=padding_mask)
        gate, intermediate = project_together(
            x, [self.gate_dense, self.intermediate_dense]
        )
        gate = ops.cast(ops.silu(ops.cast(gate, "float32")), x.dtype)
        return self.output_dense(
            pin_input(self.output_dense, intermediate * gate)
        )

    def call(
        self,
        inputs,
        padding_mask=None,
        cache=None,
        cache_update_index=None,
        positions=None,
        training=None,
    ):
        normed = self.input_layernorm(inputs)
        if self.is_linear:
            # With a cache, the padding mask covers the new tokens only.
            mixed = self.mixer(normed, padding_mask=padding_mask, cache=cache)
        else:
            batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
            key_length = length if cache is None else ops.shape(cache)[2]
            mask = decoder_attention_mask(
                batch,
                length,
                key_length,
                padding_mask=padding_mask,
                start_index=(
                    0 if cache_update_index is None else cache_update_index
                ),
            )
            extra = {}
            if cache is not None:
                extra = dict(cache=cache, cache_update_index=cache_update_index)
            mixed = self.mixer(
                normed,
                attention_mask=mask,
                positions=positions,
                training=training,
                **extra,
            )
        if cache is not None:
            mixed, cache = mixed
        residual = inputs + self.mixer_dropout(mixed, training=training)
        feedforward_mask = padding_mask
        if cache is not None and not self.is_linear:
            feedforward_mask = None
        fed = self._feedforward(
            self.post_attention_layernorm(residual), feedforward_mask
        )
        outputs = residual + ops.cast(fed, residual.dtype)
        return outputs if cache is None else (outputs, cache)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "mixer": keras.saving.serialize_keras_object(self.mixer),
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "feedforward": keras.saving.serialize_keras_object(
                    self.feedforward
                ),
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in ("mixer", "feedforward"):
            if config.get(key) is not None:
                config[key] = keras.saving.deserialize_keras_object(config[key])
        return cls(**config)
