"""The decoder block shared by the decoder-only LLM backbones."""

import inspect

import keras
from keras import ops

from keras_nlp.distribution.layout_map import pin_input
from keras_nlp.layers.cached_attention import decoder_attention_mask
from keras_nlp.layers.common import FEEDFORWARD_INPUT_DIMS
from keras_nlp.layers.common import FEEDFORWARD_OUTPUT_DIMS
from keras_nlp.layers.common import TakesLayers
from keras_nlp.layers.common import check_sublayer_keys
from keras_nlp.layers.common import get_activation
from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.fused_projection import project_together
from keras_nlp.layers.remat import RematBlock

DEFAULT_SUBLAYER_NAMES = {
    "attention_norm": "self_attention_layernorm",
    "feedforward_norm": "feedforward_layernorm",
    "intermediate": "feedforward_intermediate_dense",
    "gate": "feedforward_gate_dense",
    "output": "feedforward_output_dense",
}


def _check_block_options(
    normalization,
    intermediate_dim,
    feedforward,
    parallel_residual,
    normalize_first,
    shared_norm,
    sublayer_names,
):
    """Raises a `ValueError` naming `DecoderBlock` options that disagree."""
    if normalization not in ("rms", "layer"):
        raise ValueError(
            "`normalization` must be 'rms' or 'layer'. Received: "
            f"normalization={normalization!r}."
        )
    if feedforward is None and not intermediate_dim:
        raise ValueError(
            "Either `intermediate_dim` (for the dense feed-forward) or "
            "a `feedforward` layer is required. Received: "
            f"intermediate_dim={intermediate_dim!r}, feedforward=None."
        )
    if parallel_residual and not normalize_first:
        raise ValueError(
            "A post-norm block (`normalize_first=False`) has sequential "
            "residuals. Received: parallel_residual=True, "
            "normalize_first=False."
        )
    if shared_norm and not parallel_residual:
        raise ValueError(
            "One norm for both branches (`shared_norm=True`) needs "
            "parallel residuals (`parallel_residual=True`). Received: "
            "shared_norm=True, parallel_residual=False."
        )
    check_sublayer_keys(sublayer_names, DEFAULT_SUBLAYER_NAMES)


@keras.saving.register_keras_serializable(package="keras_nlp.layers")
class DecoderBlock(RematBlock, TakesLayers, keras.layers.Layer):
    """Causal transformer block: attention, then a feed-forward.

    Sequential (Llama, Mistral, Qwen, Phi-3, GPT-2, OPT, Bloom, Falcon):

        h = x + attention(attention_norm(x))
        y = h + feedforward(feedforward_norm(h))

    With `parallel_residual=True` (GPT-J style) both branches read `x`:
    `y = x + attention(attention_norm(x)) + feedforward(feedforward_norm(x))`.
    Adding `shared_norm=True`, both branches read one norm (Falcon-7B):
    `y = x + attention(attention_norm(x)) + feedforward(attention_norm(x))`.

    With `normalize_first=False` the block is post-norm (OPT-350M), each
    norm applied to its residual sum:

        h = attention_norm(x + attention(x))
        y = feedforward_norm(h + feedforward(h))

    The feed-forward is gated, `output(act(gate(z)) * intermediate(z))`
    (SwiGLU and friends), or plain, `output(act(intermediate(z)))`, or any
    layer passed as `feedforward` (e.g. a mixture of experts). Its dense
    layers are direct children of this block, as in the checkpoints, so
    their paths read `<block>/feedforward_gate_dense/kernel`.

    Args:
        attention: the self-attention layer, typically a
            `CachedGroupedQueryAttention` whose name is its path segment.
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of the feed-forward; unused when
            `feedforward` is given.
        feedforward: optional layer mapping `(batch, seq, hidden)` to the
            same shape, used instead of the dense feed-forward. If its
            `call` takes `padding_mask` (e.g. for a mixture of experts'
            auxiliary loss), it gets the `(batch, seq)` mask, except when
            decoding with a cache.
        activation: str. Feed-forward activation (`"silu"`, `"gelu"`,
            `"gelu_approximate"`, `"relu"`, ...). Gated feed-forwards run it
            in float32.
        gated: bool. Use the gated feed-forward.
        use_bias: bool. Biases on the feed-forward dense layers.
        normalization: `"rms"` (`keras.layers.RMSNormalization`) or
            `"layer"` (`keras.layers.LayerNormalization`).
        layer_norm_epsilon: float. Epsilon of both norms.
        parallel_residual: bool. See above.
        normalize_first: bool. Pre-norm (`True`, the default) or
            post-norm (`False`) branches, see above; post-norm cannot be
            combined with `parallel_residual`.
        shared_norm: bool. Keyword-only. With `parallel_residual`, the
            feed-forward reads the attention norm's output and the block
            has no feed-forward norm (`feedforward_norm` is `None`).
            Defaults to `False`.
        dropout: float. Dropout on each branch's output before its residual
            add.
        feedforward_dropout: float or `None`. Rate for the feed-forward
            branch instead of `dropout` (Falcon has two rates); `None`
            means `dropout`.
        kernel_initializer: initializer of the feed-forward kernels.
        sublayer_names: optional dict overriding the names
            (`attention_norm`, `feedforward_norm`, `intermediate`, `gate`,
            `output`), which are the variable paths.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(batch, seq, hidden)`.
        padding_mask: optional `(batch, key_len)`, non-zero for real tokens
            (with a cache, it covers every cache position).
        cache: optional attention cache, see `CachedGroupedQueryAttention`;
            then the call returns `(outputs, updated_cache)`.
        cache_update_index: int or scalar tensor, position of the first
            input token in the cache.
        positions: optional int `(batch, seq)` token positions for the
            rotary embedding (see `CachedGroupedQueryAttention`).
        training: bool. Enables dropout.

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers import CachedGroupedQueryAttention
    from keras_nlp.layers import DecoderBlock
    from keras_nlp.layers import RotaryEmbedding

    block = DecoderBlock(
        attention=CachedGroupedQueryAttention(
            4, 2, rotary_embedding=RotaryEmbedding(), name="self_attention"
        ),
        hidden_dim=32,
        intermediate_dim=64,
    )
    block(np.random.rand(2, 5, 32).astype("float32")).shape  # (2, 5, 32)
    ```
    """

    layer_arguments = ("attention", "feedforward")

    def __init__(
        self,
        attention,
        hidden_dim,
        intermediate_dim=None,
        feedforward=None,
        activation="silu",
        gated=True,
        use_bias=False,
        normalization="rms",
        layer_norm_epsilon=1e-6,
        parallel_residual=False,
        dropout=0.0,
        feedforward_dropout=None,
        kernel_initializer="glorot_uniform",
        sublayer_names=None,
        *,
        normalize_first=True,
        shared_norm=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        _check_block_options(
            normalization=normalization,
            intermediate_dim=intermediate_dim,
            feedforward=feedforward,
            parallel_residual=parallel_residual,
            normalize_first=normalize_first,
            shared_norm=shared_norm,
            sublayer_names=sublayer_names,
        )
        self.attention = attention
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.feedforward = feedforward
        self.activation = activation
        self.gated = gated
        self.use_bias = use_bias
        self.normalization = normalization
        self.layer_norm_epsilon = layer_norm_epsilon
        self.parallel_residual = parallel_residual
        self.normalize_first = normalize_first
        self.shared_norm = shared_norm
        self.dropout = dropout
        self.feedforward_dropout_rate = feedforward_dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.sublayer_names = dict(sublayer_names or {})
        names = {**DEFAULT_SUBLAYER_NAMES, **self.sublayer_names}
        self._activation = get_activation(activation)

        self.attention_norm = self._norm(names["attention_norm"])
        self.feedforward_norm = None
        if not shared_norm:
            self.feedforward_norm = self._norm(names["feedforward_norm"])
        self.intermediate_dense = self.gate_dense = self.output_dense = None
        if feedforward is None:
            self.intermediate_dense = self._dense(
                intermediate_dim, names["intermediate"], FEEDFORWARD_INPUT_DIMS
            )
            if gated:
                self.gate_dense = self._dense(
                    intermediate_dim, names["gate"], FEEDFORWARD_INPUT_DIMS
                )
            self.output_dense = self._dense(
                hidden_dim, names["output"], FEEDFORWARD_OUTPUT_DIMS
            )
        self.attention_dropout = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="attention_dropout"
        )
        self.feedforward_dropout = keras.layers.Dropout(
            dropout if feedforward_dropout is None else feedforward_dropout,
            dtype=self.dtype_policy,
            name="feedforward_dropout",
        )

    def _norm(self, name):
        if self.normalization == "rms":
            return keras.layers.RMSNormalization(
                epsilon=self.layer_norm_epsilon,
                dtype=self.dtype_policy,
                name=name,
            )
        return keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )

    def _dense(self, width, name, dims):
        return named_dense(
            width,
            dims,
            name=name,
            use_bias=self.use_bias,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
        )

    def build(self, input_shape):
        self.attention_norm.build(input_shape)
        self.attention.build(input_shape)
        if self.feedforward_norm is not None:
            self.feedforward_norm.build(input_shape)
        if self.feedforward is not None:
            self.feedforward.build(input_shape)
            return
        self.intermediate_dense.build(input_shape)
        if self.gate_dense is not None:
            self.gate_dense.build(input_shape)
        self.output_dense.build((*input_shape[:-1], self.intermediate_dim))

    def _feedforward(self, x, padding_mask=None):
        if self.feedforward is not None:
            call_arguments = inspect.signature(self.feedforward.call)
            if (
                padding_mask is not None
                and "padding_mask" in call_arguments.parameters
            ):
                return self.feedforward(x, padding_mask=padding_mask)
            return self.feedforward(x)
        if self.gate_dense is None:
            x = pin_input(self.intermediate_dense, x)
            intermediate = self._activation(self.intermediate_dense(x))
            return self.output_dense(pin_input(self.output_dense, intermediate))
        # Like the reference implementations, the gate's activation runs in
        # float32 even under mixed precision.
        gate, intermediate = project_together(
            x, [self.gate_dense, self.intermediate_dense]
        )
        gate = ops.cast(
            self._activation(ops.cast(gate, "float32")), self.compute_dtype
        )
        return self.output_dense(
            pin_input(self.output_dense, intermediate * gate)
        )

    def call(
        self,
        inputs,
        padding_mask=None,
        cache=None,
        cache_update_index=None,
        training=None,
        positions=None,
    ):
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        key_length = length if cache is None else ops.shape(cache)[2]
        mask = decoder_attention_mask(
            batch,
            length,
            key_length,
            padding_mask=padding_mask,
            start_index=0 if cache_update_index is None else cache_update_index,
        )
        attention_kwargs = {}
        if cache is not None:
            attention_kwargs = dict(
                cache=cache, cache_update_index=cache_update_index
            )
        if positions is not None:
            attention_kwargs["positions"] = positions
        pre_norm = self.normalize_first
        normed = self.attention_norm(inputs) if pre_norm else inputs
        attended = self.attention(
            normed,
            attention_mask=mask,
            training=training,
            **attention_kwargs,
        )
        if cache is not None:
            attended, cache = attended
        attended = self.attention_dropout(attended, training=training)

        # With a cache, the padding mask covers the cache, not the inputs.
        feedforward_mask = padding_mask if cache is None else None
        if self.parallel_residual:
            if not self.shared_norm:
                normed = self.feedforward_norm(inputs)
            fed = self._feedforward(normed, feedforward_mask)
            outputs = (
                inputs
                + attended
                + self.feedforward_dropout(fed, training=training)
            )
        elif pre_norm:
            residual = inputs + attended
            fed = self._feedforward(
                self.feedforward_norm(residual), feedforward_mask
            )
            outputs = residual + self.feedforward_dropout(
                fed, training=training
            )
        else:
            residual = self.attention_norm(inputs + attended)
            fed = self._feedforward(residual, feedforward_mask)
            outputs = self.feedforward_norm(
                residual + self.feedforward_dropout(fed, training=training)
            )
        return outputs if cache is None else (outputs, cache)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "attention": keras.saving.serialize_keras_object(
                    self.attention
                ),
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                # `serialize_keras_object(None)` is None.
                "feedforward": keras.saving.serialize_keras_object(
                    self.feedforward
                ),
                "activation": self.activation,
                "gated": self.gated,
                "use_bias": self.use_bias,
                "normalization": self.normalization,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "parallel_residual": self.parallel_residual,
                "normalize_first": self.normalize_first,
                "shared_norm": self.shared_norm,
                "dropout": self.dropout,
                "feedforward_dropout": self.feedforward_dropout_rate,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "sublayer_names": self.sublayer_names,
            }
        )
        return config
