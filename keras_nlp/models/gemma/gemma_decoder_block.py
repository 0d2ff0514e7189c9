"""One Gemma transformer block: attention and a GeGLU feed-forward."""

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_einsum_dims
from keras_nlp.distribution.layout_map import pin_input
from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.cached_attention import decoder_attention_mask
from keras_nlp.layers.common import TakesLayers
from keras_nlp.layers.fused_projection import project_together
from keras_nlp.layers.rotary_embedding import RotaryEmbedding
from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)

# The feed-forward kernels' names, as `feedforward_rules` keys: `gate` is
# the GELU branch.
FEEDFORWARD_NAMES = {
    "gate": "ffw_gating",
    "intermediate": "ffw_gating_2",
    "output": "ffw_linear",
}


def gemma_attention(
    hidden_dim,
    num_query_heads,
    num_key_value_heads,
    head_dim,
    query_head_dim_normalize=True,
    logit_soft_cap=None,
    sliding_window_size=None,
    query_pre_attn_scalar=None,
    rope_wavelength=10_000.0,
    rope_scaling_factor=1.0,
    use_query_key_norm=False,
    layer_norm_epsilon=1e-6,
    use_bidirectional_attention=False,
    dropout=0,
    dtype=None,
):
    """Gemma's self-attention: the shared layer with heads-first kernels.

    Args:
        hidden_dim: int. Width of the residual stream.
        num_query_heads: int. Number of query heads.
        num_key_value_heads: int. Number of key/value heads.
        head_dim: int. Size of every head.
        query_head_dim_normalize: bool. Scale queries by `head_dim ** -0.5`
            if `True`, else by `(hidden_dim // num_query_heads) ** -0.5`.
        logit_soft_cap: float or `None`. Attention logit soft cap.
        sliding_window_size: int or `None`. The local window, if any.
        query_pre_attn_scalar: float or `None`. Scale queries by
            `query_pre_attn_scalar ** -0.5` instead (Hugging Face's Gemma 2
            and 3 field, for values that are neither of the two above).
        rope_wavelength: float. Base wavelength of the rotary embedding.
        rope_scaling_factor: float. Its position scaling.
        use_query_key_norm: bool. Zero-centered RMS norms on query and key
            heads (Gemma 3), `attention/query_norm` and `attention/key_norm`.
        layer_norm_epsilon: float. Epsilon of those norms.
        use_bidirectional_attention: bool. Center the window on the query.
        dropout: float. Dropout on the attention probabilities.
        dtype: dtype or `keras.DTypePolicy`.

    Returns:
        A `CachedGroupedQueryAttention` named `attention`.
    """
    if query_pre_attn_scalar is not None:
        query_scale = float(query_pre_attn_scalar) ** -0.5
    elif query_head_dim_normalize:
        query_scale = head_dim**-0.5
    else:
        query_scale = (hidden_dim // num_query_heads) ** -0.5
    return CachedGroupedQueryAttention(
        num_query_heads=num_query_heads,
        num_key_value_heads=num_key_value_heads,
        head_dim=head_dim,
        rotary_embedding=RotaryEmbedding(
            max_wavelength=rope_wavelength,
            scaling_factor=rope_scaling_factor,
            dtype=dtype,
            name="rotary",
        ),
        use_query_key_norm=use_query_key_norm,
        zero_centered_query_key_norm=True,
        layer_norm_epsilon=layer_norm_epsilon,
        heads_first=True,
        sliding_window_size=sliding_window_size,
        centered_sliding_window=use_bidirectional_attention,
        # keras-hub zeroes queries without keys (left padding).
        zero_unattended_queries=True,
        logit_soft_cap=logit_soft_cap,
        query_scale=query_scale,
        dropout=dropout,
        sublayer_names={"query_norm": "query_norm", "key_norm": "key_norm"},
        dtype=dtype,
        name="attention",
    )


class GemmaDecoderBlock(TakesLayers, keras.layers.Layer):
    """Pre-norm decoder block with optional post-norms (Gemma 2 and 3).

    Computes

        h = x + post_attention_norm(attention(pre_attention_norm(x)))
        y = h + post_ffw_norm(ffw(pre_ffw_norm(h)))

    where the post-norms are identities unless enabled and
    `ffw(z) = ffw_linear(gelu(ffw_gating(z)) * ffw_gating_2(z))` with the
    tanh approximation of GELU. Every norm is a
    `ZeroCenteredRMSNormalization`. Attention is causal (or bidirectional)
    and ignores padded keys. Those norms, the post-norms and the
    bidirectional option are why Gemma has its own block rather than
    `keras_nlp.layers.DecoderBlock`.

    Args:
        attention: the self-attention layer, a `CachedGroupedQueryAttention`
            named `attention` (see `gemma_attention`).
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of each feed-forward branch (the gating
            kernels are `(hidden_dim, intermediate_dim)`).
        use_post_attention_norm: bool. Normalize the attention output before
            the residual add.
        use_post_ffw_norm: bool. Normalize the feed-forward output before the
            residual add.
        layer_norm_epsilon: float. Epsilon of every normalization.
        use_bidirectional_attention: bool. Real tokens attend to every real
            token, not only to earlier ones (no cache then).
        dropout: float. Dropout on the outputs of the attention and
            feed-forward branches.
        **kwargs: Forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: Tensor of shape `(batch, seq, hidden_dim)`.
        padding_mask: Optional `(batch, key_len)` tensor, non-zero for real
            tokens (with a cache, it covers every cache position).
        cache: Optional attention cache, see `CachedGroupedQueryAttention`;
            then the call returns `(outputs, updated_cache)`.
        cache_update_index: int or scalar tensor, position of the first
            input token in the cache.
        positions: optional int `(batch, seq)` token positions for the
            rotary embedding (see `CachedGroupedQueryAttention`).
        training: bool. Enables dropout.
        attention_mask: Optional boolean `(batch, seq, key_len)` mask of
            allowed query/key pairs, used instead of the causal (or
            bidirectional) padding mask, e.g. PaliGemma's prefix-LM mask.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.gemma.gemma_decoder_block import GemmaDecoderBlock
    from keras_nlp.models.gemma.gemma_decoder_block import gemma_attention

    block = GemmaDecoderBlock(
        attention=gemma_attention(
            hidden_dim=32, num_query_heads=4, num_key_value_heads=1, head_dim=8
        ),
        hidden_dim=32,
        intermediate_dim=64,
    )
    outputs = block(np.ones((2, 5, 32), "float32"))  # shape (2, 5, 32)
    ```
    """

    layer_arguments = ("attention",)

    def __init__(
        self,
        attention,
        hidden_dim,
        intermediate_dim,
        use_post_attention_norm=False,
        use_post_ffw_norm=False,
        layer_norm_epsilon=1e-6,
        use_bidirectional_attention=False,
        dropout=0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.use_post_attention_norm = use_post_attention_norm
        self.use_post_ffw_norm = use_post_ffw_norm
        self.layer_norm_epsilon = layer_norm_epsilon
        self.use_bidirectional_attention = use_bidirectional_attention
        self.dropout = dropout

        def norm(name):
            return ZeroCenteredRMSNormalization(
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

        self.pre_attention_norm = norm("pre_attention_norm")
        self.attention = attention
        self.post_attention_norm = (
            norm("post_attention_norm") if use_post_attention_norm else None
        )
        self.pre_ffw_norm = norm("pre_ffw_norm")
        names = FEEDFORWARD_NAMES
        self.gating_ffw = dense("btd,df->btf", intermediate_dim, names["gate"])
        self.gating_ffw_2 = dense(
            "btd,df->btf", intermediate_dim, names["intermediate"]
        )
        self.ffw_linear = dense("btf,fd->btd", hidden_dim, names["output"])
        self.post_ffw_norm = (
            norm("post_ffw_norm") if use_post_ffw_norm else None
        )
        self.attention_dropout = keras.layers.Dropout(
            rate=dropout, dtype=self.dtype_policy, name="attention_dropout"
        )
        self.ffw_dropout = keras.layers.Dropout(
            rate=dropout, dtype=self.dtype_policy, name="ffw_dropout"
        )

    def build(self, input_shape):
        self.pre_attention_norm.build(input_shape)
        self.attention.build(input_shape)
        if self.post_attention_norm is not None:
            self.post_attention_norm.build(input_shape)
        self.pre_ffw_norm.build(input_shape)
        self.gating_ffw.build(input_shape)
        self.gating_ffw_2.build(input_shape)
        self.ffw_linear.build((*input_shape[:-1], self.intermediate_dim))
        if self.post_ffw_norm is not None:
            self.post_ffw_norm.build(input_shape)

    def _attention_mask(self, inputs, padding_mask, cache, cache_update_index):
        """Boolean `(batch, seq, key_len)` mask of allowed query/key pairs."""
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        if not self.use_bidirectional_attention:
            return decoder_attention_mask(
                batch,
                length,
                length if cache is None else ops.shape(cache)[2],
                padding_mask=padding_mask,
                start_index=(
                    0 if cache_update_index is None else cache_update_index
                ),
            )
        if cache is not None:
            raise ValueError(
                "A bidirectional Gemma block attends to later tokens, so it "
                "cannot decode into a cache. Received a cache with "
                "use_bidirectional_attention=True."
            )
        if padding_mask is None:
            return ops.ones((batch, length, length), "bool")
        # Real tokens attend to real tokens; padded rows get no keys.
        valid = ops.cast(padding_mask, "bool")
        return ops.logical_and(valid[:, :, None], valid[:, None, :])

    def call(
        self,
        inputs,
        padding_mask=None,
        cache=None,
        cache_update_index=None,
        training=None,
        attention_mask=None,
        positions=None,
    ):
        mask = attention_mask
        if mask is None:
            mask = self._attention_mask(
                inputs, padding_mask, cache, cache_update_index
            )
        cache_kwargs = {}
        if cache is not None:
            cache_kwargs = dict(
                cache=cache, cache_update_index=cache_update_index
            )
        if positions is not None:
            cache_kwargs["positions"] = positions
        x = self.attention(
            self.pre_attention_norm(inputs),
            attention_mask=mask,
            training=training,
            **cache_kwargs,
        )
        if cache is not None:
            x, cache = x
        if self.post_attention_norm is not None:
            x = self.post_attention_norm(x)
        if self.dropout > 0:
            x = self.attention_dropout(x, training=training)
        residual = inputs + x

        x = self.pre_ffw_norm(residual)
        # One matmul for both gates where sharded (one all-reduce back).
        gate, up = project_together(x, [self.gating_ffw, self.gating_ffw_2])
        x = keras.activations.gelu(gate, approximate=True) * up
        x = self.ffw_linear(pin_input(self.ffw_linear, x))
        if self.post_ffw_norm is not None:
            x = self.post_ffw_norm(x)
        if self.dropout > 0:
            x = self.ffw_dropout(x, training=training)
        outputs = residual + x
        if cache is not None:
            return outputs, cache
        return outputs

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
                "use_post_attention_norm": self.use_post_attention_norm,
                "use_post_ffw_norm": self.use_post_ffw_norm,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "use_bidirectional_attention": (
                    self.use_bidirectional_attention
                ),
                "dropout": self.dropout,
            }
        )
        return config
