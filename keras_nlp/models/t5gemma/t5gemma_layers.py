"""The blocks of T5Gemma (and T5Gemma 2's encoder): Gemma 2 style blocks
with an encoder's bidirectional attention, or a decoder's causal
self-attention followed by cross-attention over the encoder's outputs.

Names follow keras-hub's checkpoints, so the variable paths read
`encoder_layer_0/self_attention/query/kernel`,
`decoder_layer_0/cross_attention/key/kernel` and
`decoder_layer_0/mlp/gate_proj/kernel`.
"""

import keras

from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.cached_attention import decoder_attention_mask
from keras_nlp.layers.common import TakesLayers
from keras_nlp.layers.common import check_rates
from keras_nlp.layers.cross_attention_decoder_block import attend_encoder
from keras_nlp.layers.cross_attention_decoder_block import attend_self
from keras_nlp.layers.cross_attention_decoder_block import check_encoder_source
from keras_nlp.layers.gated_feedforward import GatedFeedForward
from keras_nlp.layers.rotary_embedding import RotaryEmbedding
from keras_nlp.layers.transformer_encoder import encoder_attention_mask
from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)

# The values of `encoder_layer_types` and `decoder_layer_types`.
LAYER_TYPES = ("sliding_attention", "full_attention")
# The feed-forward kernels' names (`GatedFeedForward` keys): the GELU
# branch is `gate_proj`.
FEEDFORWARD_NAMES = {
    "gate": "gate_proj",
    "intermediate": "up_proj",
    "output": "down_proj",
}


def check_layer_types(name, layer_types, num_layers, sliding_window):
    """Raises a `ValueError` unless `layer_types` has one of `LAYER_TYPES`
    per layer, and a `sliding_window` is given where one is sliding."""
    if (
        not isinstance(layer_types, (list, tuple))
        or len(layer_types) != num_layers
        or not all(t in LAYER_TYPES for t in layer_types)
    ):
        raise ValueError(
            f"`{name}` must list one of {LAYER_TYPES} per layer "
            f"({num_layers} layers). Received: {name}={layer_types!r}."
        )
    if "sliding_attention" in layer_types and not sliding_window:
        raise ValueError(
            f"`{name}` has sliding_attention layers, which need a positive "
            f"`sliding_window`. Received: sliding_window={sliding_window!r}."
        )


def t5gemma_attention(
    name,
    num_query_heads,
    num_key_value_heads,
    head_dim,
    query_pre_attn_scalar,
    use_bias,
    logit_soft_cap,
    dropout,
    rope_wavelength=None,
    rope_scaling_factor=1.0,
    sliding_window_size=None,
    centered_sliding_window=False,
    use_query_key_norm=False,
    layer_norm_epsilon=1e-6,
    key_value_input_dim=None,
    kernel_initializer="glorot_uniform",
    dtype=None,
    attention_class=CachedGroupedQueryAttention,
):
    """A T5Gemma attention: the shared layer with keras-hub's kernels.

    Query/key/value kernels `(hidden, heads, head_dim)`, output
    `(heads, head_dim, hidden)`, biases on all four with `use_bias`;
    queries scaled by `query_pre_attn_scalar ** -0.5`.

    Args:
        name: the layer name (`self_attention`, `cross_attention`).
        rope_wavelength: float, or `None` for no rotary embedding (the
            cross-attention's).
        sliding_window_size: int or `None`: keys fewer than this many
            positions before the query (or, `centered_sliding_window`,
            around it).
        use_query_key_norm: bool. Zero-centered RMS norms on query and key
            heads (T5Gemma 2), `query_norm` and `key_norm`.
        key_value_input_dim: int or `None`: the width keys and values are
            projected from, where it is not the queries'.
        attention_class: the layer class, `CachedGroupedQueryAttention` or
            a subclass (T5Gemma 2's merged attention).
        The others are `CachedGroupedQueryAttention`'s.
    """
    rotary = None
    if rope_wavelength is not None:
        rotary = RotaryEmbedding(
            max_wavelength=rope_wavelength,
            scaling_factor=rope_scaling_factor,
            dtype=dtype,
            name="rotary_embedding",
        )
    return attention_class(
        num_query_heads=num_query_heads,
        num_key_value_heads=num_key_value_heads,
        head_dim=head_dim,
        rotary_embedding=rotary,
        use_query_key_norm=use_query_key_norm,
        zero_centered_query_key_norm=True,
        layer_norm_epsilon=layer_norm_epsilon,
        use_bias=use_bias,
        use_output_bias=use_bias,
        sliding_window_size=sliding_window_size,
        centered_sliding_window=centered_sliding_window,
        logit_soft_cap=logit_soft_cap,
        query_scale=float(query_pre_attn_scalar) ** -0.5,
        dropout=dropout,
        kernel_initializer=kernel_initializer,
        sublayer_names={"query_norm": "query_norm", "key_norm": "key_norm"},
        key_value_input_dim=key_value_input_dim,
        dtype=dtype,
        name=name,
    )


class _GemmaStyleBlock(TakesLayers, keras.layers.Layer):
    """What the encoder and decoder blocks share: zero-centered RMS norms
    around each branch, the GeGLU `mlp`, and residual dropout."""

    # The attention layers the constructor takes, and the attributes that
    # hold them, in the same order (serialized by `get_config`).
    layer_arguments = ("attention",)
    attention_attributes = ("self_attention",)

    def __init__(
        self,
        intermediate_dim,
        hidden_activation="gelu_approximate",
        layer_norm_epsilon=1e-6,
        dropout=0.0,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_rates(dropout=dropout)
        self.intermediate_dim = intermediate_dim
        self.hidden_activation = hidden_activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.mlp = GatedFeedForward(
            intermediate_dim,
            activation=hidden_activation,
            kernel_initializer=self.kernel_initializer,
            sublayer_names=FEEDFORWARD_NAMES,
            dtype=self.dtype_policy,
            name="mlp",
        )
        self.residual_dropout = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="residual_dropout"
        )

    def _norm(self, name):
        return ZeroCenteredRMSNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )

    def _branch(self, x, pre_norm, post_norm, branch, training):
        """`x + dropout(post_norm(branch(pre_norm(x))))`."""
        y = post_norm(branch(pre_norm(x)))
        return x + self.residual_dropout(y, training=training)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "intermediate_dim": self.intermediate_dim,
                "hidden_activation": self.hidden_activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        for argument, attribute in zip(
            self.layer_arguments, self.attention_attributes, strict=True
        ):
            config[argument] = keras.saving.serialize_keras_object(
                getattr(self, attribute)
            )
        return config


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class T5GemmaEncoderBlock(_GemmaStyleBlock):
    """Bidirectional self-attention, then a GeGLU feed-forward.

        h = x + post_attention_norm(attention(pre_attention_norm(x)))
        y = h + post_feedforward_norm(mlp(pre_feedforward_norm(h)))

    Every query attends to every real key (within the attention's window,
    if it has one). The norms are `pre_self_attention_layernorm`,
    `post_self_attention_layernorm`, `pre_feedforward_layernorm` and
    `post_feedforward_layernorm`, keras-hub's names.

    Args:
        attention: the self-attention, a `CachedGroupedQueryAttention`
            named `self_attention` (see `t5gemma_attention`).
        intermediate_dim: int. Width of each feed-forward branch.
        hidden_activation: str. The gate's activation. Defaults to
            `"gelu_approximate"`.
        layer_norm_epsilon: float. Epsilon of every norm.
        dropout: float. Dropout on each branch before its residual add.
        kernel_initializer: initializer of the feed-forward kernels.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(batch, length, hidden)`.
        padding_mask: optional `(batch, length)`, non-zero for real tokens.
        training: bool. Enables dropout.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.t5gemma.t5gemma_layers import T5GemmaEncoderBlock
    from keras_nlp.models.t5gemma.t5gemma_layers import t5gemma_attention

    attention = t5gemma_attention(
        "self_attention", num_query_heads=4, num_key_value_heads=2,
        head_dim=8, query_pre_attn_scalar=8, use_bias=False,
        logit_soft_cap=None, dropout=0.0, rope_wavelength=10_000.0,
    )
    block = T5GemmaEncoderBlock(attention, intermediate_dim=64)
    block(np.ones((2, 5, 32), "float32")).shape  # (2, 5, 32)
    ```
    """

    def __init__(self, attention, intermediate_dim, **kwargs):
        super().__init__(intermediate_dim, **kwargs)
        self.self_attention = attention
        self.pre_attention_norm = self._norm("pre_self_attention_layernorm")
        self.post_attention_norm = self._norm("post_self_attention_layernorm")
        self.pre_feedforward_norm = self._norm("pre_feedforward_layernorm")
        self.post_feedforward_norm = self._norm("post_feedforward_layernorm")

    def build(self, input_shape):
        # keras-hub's order, so the variables list alike.
        self.self_attention.build(input_shape)
        self.pre_attention_norm.build(input_shape)
        self.post_attention_norm.build(input_shape)
        self.mlp.build(input_shape)
        self.pre_feedforward_norm.build(input_shape)
        self.post_feedforward_norm.build(input_shape)

    def call(self, inputs, padding_mask=None, training=None):
        mask = None
        if padding_mask is not None:
            mask = encoder_attention_mask(
                padding_mask, keras.ops.shape(inputs)[1]
            )
        x = self._branch(
            inputs,
            self.pre_attention_norm,
            self.post_attention_norm,
            lambda y: self.self_attention(
                y, attention_mask=mask, training=training
            ),
            training,
        )
        return self._branch(
            x,
            self.pre_feedforward_norm,
            self.post_feedforward_norm,
            self.mlp,
            training,
        )

    def compute_output_shape(self, input_shape):
        return input_shape


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class T5GemmaDecoderBlock(_GemmaStyleBlock):
    """Causal self-attention, cross-attention, then a GeGLU feed-forward.

    Each of the three branches is
    `x + dropout(post_norm(branch(pre_norm(x))))`; `self_attention`
    attends causally over the decoder's real tokens (within its window,
    if it has one), `cross_attention` takes its keys and values from the
    encoder's outputs (`encoder_sequence`). The norms are keras-hub's
    `decoder_{pre,post}_{self_attention,cross_attention,feedforward}_layernorm`.

    Args:
        self_attention: a `CachedGroupedQueryAttention` named
            `self_attention`, with a rotary embedding.
        cross_attention: one named `cross_attention`, without.
        intermediate_dim: int. Width of each feed-forward branch.
        **kwargs: `hidden_activation`, `layer_norm_epsilon`, `dropout`,
            `kernel_initializer` as `T5GemmaEncoderBlock`'s, and
            `keras.layers.Layer`'s (`name`, `dtype`, ...).

    Call arguments:
        decoder_sequence: `(batch, target_len, hidden)`.
        encoder_sequence: `(batch, source_len, encoder_hidden)`.
        decoder_padding_mask: optional `(batch, target_len)` (with a
            cache, `(batch, max_len)`), non-zero for real tokens.
        encoder_padding_mask: optional `(batch, source_len)`.
        training: bool. Enables dropout.
        self_attention_cache: optional `(batch, 2, max_len, kv_heads,
            head_dim)`, for cached decoding; the call then returns
            `(outputs, updated cache)`.
        self_attention_cache_update_index: int or scalar tensor, the slot
            of the first decoder token.
        cross_attention_cache: optional `(batch, 2, source_len, kv_heads,
            head_dim)` (`cross_attention_cache`), read instead of
            `encoder_sequence`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.t5gemma.t5gemma_layers import T5GemmaDecoderBlock
    from keras_nlp.models.t5gemma.t5gemma_layers import t5gemma_attention

    options = dict(
        num_query_heads=4, num_key_value_heads=2, head_dim=8,
        query_pre_attn_scalar=8, use_bias=False, logit_soft_cap=None,
        dropout=0.0,
    )
    block = T5GemmaDecoderBlock(
        t5gemma_attention("self_attention", rope_wavelength=1e4, **options),
        t5gemma_attention("cross_attention", **options),
        intermediate_dim=64,
    )
    decoder = np.ones((2, 3, 32), "float32")
    encoder = np.ones((2, 5, 32), "float32")
    block(decoder, encoder).shape  # (2, 3, 32)
    ```
    """

    layer_arguments = ("self_attention", "cross_attention")
    attention_attributes = layer_arguments

    def __init__(
        self, self_attention, cross_attention, intermediate_dim, **kwargs
    ):
        super().__init__(intermediate_dim, **kwargs)
        self.self_attention = self_attention
        self.cross_attention = cross_attention
        prefix = "decoder_"
        self.pre_self_norm = self._norm(prefix + "pre_self_attention_layernorm")
        self.post_self_norm = self._norm(
            prefix + "post_self_attention_layernorm"
        )
        self.pre_cross_norm = self._norm(
            prefix + "pre_cross_attention_layernorm"
        )
        self.post_cross_norm = self._norm(
            prefix + "post_cross_attention_layernorm"
        )
        self.pre_feedforward_norm = self._norm(
            prefix + "pre_feedforward_layernorm"
        )
        self.post_feedforward_norm = self._norm(
            prefix + "post_feedforward_layernorm"
        )

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        shape = decoder_sequence_shape
        self.self_attention.build(shape)
        self.pre_self_norm.build(shape)
        self.post_self_norm.build(shape)
        # Keys and values read the encoder (`key_value_input_dim`).
        self.cross_attention.build(shape)
        self.pre_cross_norm.build(shape)
        self.post_cross_norm.build(shape)
        self.mlp.build(shape)
        self.pre_feedforward_norm.build(shape)
        self.post_feedforward_norm.build(shape)

    def cross_attention_cache(self, encoder_sequence):
        """The cross-attention's keys and values of the encoder's outputs,
        `(batch, 2, source_len, kv_heads, head_dim)`: computed once per
        source, read by every decoding step."""
        return self.cross_attention.key_value_cache(encoder_sequence)

    def _self_mask(self, x, padding_mask, cache, start_index):
        shape = keras.ops.shape(x)
        key_length = shape[1] if cache is None else keras.ops.shape(cache)[2]
        return decoder_attention_mask(
            shape[0],
            shape[1],
            key_length,
            padding_mask=padding_mask,
            start_index=start_index,
        )

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        training=None,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
    ):
        check_encoder_source(self, encoder_sequence, cross_attention_cache)
        start_index = 0
        if self_attention_cache is not None:
            start_index = self_attention_cache_update_index
        self_mask = self._self_mask(
            decoder_sequence,
            decoder_padding_mask,
            self_attention_cache,
            start_index,
        )
        cross_mask = None
        if encoder_padding_mask is not None:
            cross_mask = encoder_attention_mask(
                encoder_padding_mask, keras.ops.shape(decoder_sequence)[1]
            )
        updated = []

        def self_attend(y):
            return attend_self(
                self.self_attention,
                y,
                self_mask,
                self_attention_cache,
                start_index,
                training,
                updated,
            )

        def cross_attend(y):
            return attend_encoder(
                self.cross_attention,
                y,
                cross_mask,
                encoder_sequence,
                cross_attention_cache,
                training,
            )

        x = self._branch(
            decoder_sequence,
            self.pre_self_norm,
            self.post_self_norm,
            self_attend,
            training,
        )
        x = self._branch(
            x, self.pre_cross_norm, self.post_cross_norm, cross_attend, training
        )
        x = self._branch(
            x,
            self.pre_feedforward_norm,
            self.post_feedforward_norm,
            self.mlp,
            training,
        )
        return x if self_attention_cache is None else (x, updated[0])

    def compute_output_shape(self, decoder_sequence_shape, *args, **kwargs):
        return decoder_sequence_shape
