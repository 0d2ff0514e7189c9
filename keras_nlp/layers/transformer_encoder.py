"""The transformer encoder block shared by the encoder backbones."""

import keras
from keras import ops

from keras_nlp.distribution.layout_map import pin_input
from keras_nlp.layers.common import TakesLayers
from keras_nlp.layers.common import check_rates
from keras_nlp.layers.common import check_sublayer_keys
from keras_nlp.layers.common import feedforward_denses
from keras_nlp.layers.remat import RematBlock

# keras-hub's `TransformerEncoder` names, which are the checkpoints' paths.
DEFAULT_SUBLAYER_NAMES = {
    "attention_norm": "self_attention_layer_norm",
    "feedforward_norm": "feedforward_layer_norm",
    "intermediate": "feedforward_intermediate_dense",
    "output": "feedforward_output_dense",
}


def encoder_attention_mask(padding_mask, query_length):
    """Boolean `(batch, query_length, key_length)`: every query sees every
    real key.

    Padded queries attend to the real keys too, so their outputs are
    defined (and equal keras-hub's).

    Args:
        padding_mask: `(batch, key_length)`, non-zero for real tokens.
        query_length: int or scalar tensor.
    """
    keys = ops.cast(padding_mask, "bool")[:, None, :]
    shape = ops.shape(padding_mask)
    return ops.broadcast_to(keys, (shape[0], query_length, shape[1]))


@keras.saving.register_keras_serializable(package="keras_nlp.layers")
class TransformerEncoderBlock(RematBlock, TakesLayers, keras.layers.Layer):
    """Bidirectional transformer block (BERT and its relatives, Whisper).

    Post-norm (BERT, BART):

        h = attention_norm(x + dropout(mixing(x)))
        y = feedforward_norm(h + dropout(output(act(intermediate(h)))))

    Pre-norm with `normalize_first=True` (Whisper's encoder):

        h = x + dropout(mixing(attention_norm(x)))
        y = h + dropout(output(act(intermediate(feedforward_norm(h)))))

    `mixing` is the token-mixing layer: multi-head self-attention (a
    `CachedGroupedQueryAttention` with as many key/value heads as query
    heads, biases everywhere), DeBERTa's disentangled attention, or
    F-Net's Fourier transform. It is called as `mixing(x, attention_mask=
    mask, training=training, **mixing_kwargs)` with a
    `(batch, seq, seq)` mask that lets every query see every real key. The
    feed-forward's dense layers are children of this block, so their paths
    read `<block>/feedforward_intermediate_dense/kernel`.

    Args:
        mixing: the token-mixing layer; its name is its path segment.
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of the feed-forward.
        activation: str. Feed-forward activation (`"gelu"`,
            `"gelu_approximate"`, `"relu"`, ...).
        layer_norm_epsilon: float. Epsilon of both LayerNorms.
        dropout: float. Dropout on each branch before its residual add.
        kernel_initializer: initializer of the feed-forward kernels.
        bias_initializer: initializer of their biases.
        sublayer_names: optional dict overriding the names
            (`attention_norm`, `feedforward_norm`, `intermediate`,
            `output`), which are the variable paths.
        mixing_output_dropout: bool. `False` applies `dropout` to the
            feed-forward branch only (F-Net: nothing drops the Fourier
            transform's output). Defaults to `True`.
        normalize_first: bool. Normalize each branch's input (pre-norm)
            instead of each residual sum (post-norm). Defaults to `False`.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(batch, seq, hidden)`.
        padding_mask: optional `(batch, seq)`, non-zero for real tokens.
        training: bool. Enables dropout.
        **mixing_kwargs: passed on to `mixing` (e.g. DeBERTa's relative
            embeddings).

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers import CachedGroupedQueryAttention
    from keras_nlp.layers import TransformerEncoderBlock

    block = TransformerEncoderBlock(
        mixing=CachedGroupedQueryAttention(
            4, 4, use_bias=True, use_output_bias=True,
            name="self_attention_layer",
        ),
        hidden_dim=32,
        intermediate_dim=64,
    )
    x = np.random.rand(2, 5, 32).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    block(x, padding_mask=mask).shape  # (2, 5, 32)
    ```
    """

    layer_arguments = ("mixing",)

    def __init__(
        self,
        mixing,
        hidden_dim,
        intermediate_dim,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        dropout=0.0,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        sublayer_names=None,
        mixing_output_dropout=True,
        normalize_first=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_sublayer_keys(sublayer_names, DEFAULT_SUBLAYER_NAMES)
        check_rates(dropout=dropout)
        self.mixing = mixing
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.sublayer_names = dict(sublayer_names or {})
        self.mixing_output_dropout = mixing_output_dropout
        self.normalize_first = normalize_first
        names = {**DEFAULT_SUBLAYER_NAMES, **self.sublayer_names}

        self.attention_norm = self._norm(names["attention_norm"])
        self.feedforward_norm = self._norm(names["feedforward_norm"])
        dense_options = dict(
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
        )
        self.intermediate_dense, self.output_dense = feedforward_denses(
            hidden_dim,
            intermediate_dim,
            activation,
            (names["intermediate"], names["output"]),
            **dense_options,
        )
        self.mixing_dropout = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="mixing_dropout"
        )
        self.feedforward_dropout = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="feedforward_dropout"
        )

    def _norm(self, name):
        return keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )

    def build(self, input_shape):
        self.mixing.build(input_shape)
        self.attention_norm.build(input_shape)
        self.intermediate_dense.build(input_shape)
        self.output_dense.build((*input_shape[:-1], self.intermediate_dim))
        self.feedforward_norm.build(input_shape)

    def call(self, inputs, padding_mask=None, training=None, **mixing_kwargs):
        mask = None
        if padding_mask is not None:
            mask = encoder_attention_mask(padding_mask, ops.shape(inputs)[1])
        pre_norm = self.normalize_first
        mixed = self.mixing(
            self.attention_norm(inputs) if pre_norm else inputs,
            attention_mask=mask,
            training=training,
            **mixing_kwargs,
        )
        if self.mixing_output_dropout:
            mixed = self.mixing_dropout(mixed, training=training)
        x = inputs + mixed
        if not pre_norm:
            x = self.attention_norm(x)
        intermediate = self.intermediate_dense(
            self.feedforward_norm(x) if pre_norm else x
        )
        fed = self.output_dense(pin_input(self.output_dense, intermediate))
        y = x + self.feedforward_dropout(fed, training=training)
        return y if pre_norm else self.feedforward_norm(y)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "mixing": keras.saving.serialize_keras_object(self.mixing),
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self.bias_initializer
                ),
                "sublayer_names": self.sublayer_names,
                "mixing_output_dropout": self.mixing_output_dropout,
                "normalize_first": self.normalize_first,
            }
        )
        return config
