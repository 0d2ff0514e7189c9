"""One GPT-NeoX transformer block: attention and MLP side by side."""

import keras
from keras import ops

from keras_nlp.models.gpt_neo_x.gpt_neo_x_attention import GPTNeoXAttention
from keras_nlp.models.gpt_neo_x.gpt_neo_x_attention import (
    gpt_neo_x_kernel_initializer,
)


class GPTNeoXDecoderBlock(keras.layers.Layer):
    """Causal decoder block with parallel attention and MLP residuals.

    Computes

        y = x + attention(ln_1(x)) + mlp(ln_2(x))

    where `ln_1` and `ln_2` are separate layer normalizations of the same
    input and `mlp(z) = W_out gelu(W_in z + b_in) + b_out` with the tanh
    approximation of GELU. Attention is causal and ignores padded keys.

    Args:
        num_heads: int. Number of attention heads.
        intermediate_dim: int. Width of the MLP's hidden layer.
        rotary_percentage: float. Fraction of each head that is rotated.
        rotary_max_wavelength: int. Base wavelength of the rotary embedding.
        layer_norm_epsilon: float. Epsilon of both layer normalizations.
        dropout: float. Dropout on attention probabilities and on the outputs
            of the attention and MLP branches.
        **kwargs: Forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: Tensor of shape `(batch, seq, hidden_dim)`.
        padding_mask: Optional `(batch, seq)` tensor, non-zero for real
            tokens.
        training: bool. Enables dropout.
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        rotary_percentage=0.25,
        rotary_max_wavelength=10000,
        layer_norm_epsilon=1e-5,
        dropout=0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.rotary_percentage = rotary_percentage
        self.rotary_max_wavelength = rotary_max_wavelength
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = dropout

        def layer_norm(name):
            return keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name=name
            )

        self.self_attention_layer_norm = layer_norm("self_attention_layer_norm")
        self.self_attention = GPTNeoXAttention(
            num_heads=num_heads,
            rotary_percentage=rotary_percentage,
            rotary_max_wavelength=rotary_max_wavelength,
            dropout=dropout,
            dtype=self.dtype_policy,
            name="self_attention",
        )
        self.feedforward_layer_norm = layer_norm("feedforward_layer_norm")
        self.feedforward_intermediate_dense = keras.layers.Dense(
            intermediate_dim,
            kernel_initializer=gpt_neo_x_kernel_initializer(),
            dtype=self.dtype_policy,
            name="feedforward_intermediate_dense",
        )
        self.feedforward_output_dense = None  # Needs hidden_dim: see build.
        self.self_attention_dropout = keras.layers.Dropout(
            rate=dropout, dtype=self.dtype_policy, name="self_attention_dropout"
        )
        self.feedforward_dropout = keras.layers.Dropout(
            rate=dropout, dtype=self.dtype_policy, name="feedforward_dropout"
        )

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        self.feedforward_output_dense = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=gpt_neo_x_kernel_initializer(),
            dtype=self.dtype_policy,
            name="feedforward_output_dense",
        )
        self.self_attention_layer_norm.build(input_shape)
        self.self_attention.build(input_shape)
        self.feedforward_layer_norm.build(input_shape)
        self.feedforward_intermediate_dense.build(input_shape)
        self.feedforward_output_dense.build(
            (*input_shape[:-1], self.intermediate_dim)
        )

    def _attention_mask(self, inputs, padding_mask):
        """Boolean `(batch, seq, seq)` mask: causal and no padded keys."""
        batch, seq_len = ops.shape(inputs)[0], ops.shape(inputs)[1]
        positions = ops.arange(seq_len, dtype="int32")
        causal = ops.expand_dims(positions[:, None] >= positions[None, :], 0)
        if padding_mask is None:
            return ops.broadcast_to(causal, (batch, seq_len, seq_len))
        keys = ops.cast(padding_mask, "bool")[:, None, :]
        return ops.logical_and(causal, keys)

    def call(self, inputs, padding_mask=None, training=None):
        mask = self._attention_mask(inputs, padding_mask)

        # Both branches read the block input, not each other's output.
        attention = self.self_attention(
            self.self_attention_layer_norm(inputs),
            attention_mask=mask,
            training=training,
        )
        attention = self.self_attention_dropout(attention, training=training)

        x = self.feedforward_intermediate_dense(
            self.feedforward_layer_norm(inputs)
        )
        x = keras.activations.gelu(x, approximate=True)
        x = self.feedforward_output_dense(x)
        feedforward = self.feedforward_dropout(x, training=training)
        return inputs + attention + feedforward

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "rotary_percentage": self.rotary_percentage,
                "rotary_max_wavelength": self.rotary_max_wavelength,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "dropout": self.dropout,
            }
        )
        return config
