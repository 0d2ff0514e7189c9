"""One Gemma 3 transformer block: attention and a GeGLU feed-forward."""

import keras
from keras import ops

from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)
from keras_nlp.models.gemma3.gemma3_attention import Gemma3Attention


# `GemmaDecoderBlock` hard-codes `GemmaAttention` and gating branches of
# `intermediate_dim // 2`; Gemma 3 needs `Gemma3Attention` and branches of
# `intermediate_dim`, so this block is its own layer with the same structure
# and sub-layer names.
class Gemma3DecoderBlock(keras.layers.Layer):
    """Gemma 2 style decoder block with Gemma 3 attention.

    Computes

        h = x + post_attention_norm(attention(pre_attention_norm(x)))
        y = h + post_ffw_norm(ffw(pre_ffw_norm(h)))

    where the post-norms are identities unless enabled and
    `ffw(z) = ffw_linear(gelu(ffw_gating(z)) * ffw_gating_2(z))` with the
    tanh approximation of GELU. Attention is causal (or bidirectional) and
    ignores padded keys.

    Args:
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of each feed-forward branch (the gating
            kernels are `(hidden_dim, intermediate_dim)`).
        head_dim: int. Size of every attention head.
        num_query_heads: int. Number of query heads.
        num_key_value_heads: int. Number of key/value heads.
        query_head_dim_normalize: bool. See `Gemma3Attention`.
        use_query_key_norm: bool. RMS-normalize query and key heads.
        use_post_ffw_norm: bool. Normalize the feed-forward output before the
            residual add.
        use_post_attention_norm: bool. Normalize the attention output before
            the residual add.
        logit_soft_cap: float or `None`. Attention logit soft cap.
        use_sliding_window_attention: bool. Restrict attention to a window.
        sliding_window_size: int. Width of the window.
        layer_norm_epsilon: float. Epsilon of every normalization.
        rope_wavelength: float. Base wavelength of the rotary embedding.
        rope_scaling_factor: float. Position scaling of the rotary embedding.
        use_bidirectional_attention: bool. If `True`, every token attends to
            every non-padded token (within a centered window if sliding),
            instead of only to earlier ones.
        dropout: float. Dropout on attention probabilities and on the outputs
            of the attention and feed-forward sub-blocks.
        **kwargs: Forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: Tensor of shape `(batch, seq, hidden_dim)`.
        padding_mask: Optional `(batch, seq)` tensor, non-zero for real
            tokens.
        training: bool. Enables dropout.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.gemma3.gemma3_decoder_block import (
        Gemma3DecoderBlock,
    )

    block = Gemma3DecoderBlock(
        hidden_dim=32,
        intermediate_dim=64,
        head_dim=8,
        num_query_heads=4,
        num_key_value_heads=1,
        use_query_key_norm=True,
    )
    outputs = block(np.ones((2, 5, 32), "float32"))  # shape (2, 5, 32)
    ```
    """

    def __init__(
        self,
        hidden_dim,
        intermediate_dim,
        head_dim,
        num_query_heads,
        num_key_value_heads,
        query_head_dim_normalize=True,
        use_query_key_norm=False,
        use_post_ffw_norm=False,
        use_post_attention_norm=False,
        logit_soft_cap=None,
        use_sliding_window_attention=False,
        sliding_window_size=4096,
        layer_norm_epsilon=1e-6,
        rope_wavelength=10_000.0,
        rope_scaling_factor=1.0,
        use_bidirectional_attention=False,
        dropout=0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.head_dim = head_dim
        self.num_query_heads = num_query_heads
        self.num_key_value_heads = num_key_value_heads
        self.query_head_dim_normalize = query_head_dim_normalize
        self.use_query_key_norm = use_query_key_norm
        self.use_post_ffw_norm = use_post_ffw_norm
        self.use_post_attention_norm = use_post_attention_norm
        self.logit_soft_cap = logit_soft_cap
        self.use_sliding_window_attention = use_sliding_window_attention
        self.sliding_window_size = sliding_window_size
        self.layer_norm_epsilon = layer_norm_epsilon
        self.rope_wavelength = rope_wavelength
        self.rope_scaling_factor = rope_scaling_factor
        self.use_bidirectional_attention = use_bidirectional_attention
        self.dropout = dropout

        def norm(name):
            return ZeroCenteredRMSNormalization(
                epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name=name
            )

        def dense(equation, width, name):
            return keras.layers.EinsumDense(
                equation,
                output_shape=(None, width),
                dtype=self.dtype_policy,
                name=name,
            )

        self.pre_attention_norm = norm("pre_attention_norm")
        # Created here (not in build) so invalid head ratios fail early.
        self.attention = Gemma3Attention(
            num_query_heads=num_query_heads,
            num_key_value_heads=num_key_value_heads,
            head_dim=head_dim,
            query_head_dim_normalize=query_head_dim_normalize,
            use_query_key_norm=use_query_key_norm,
            layer_norm_epsilon=layer_norm_epsilon,
            rope_wavelength=rope_wavelength,
            rope_scaling_factor=rope_scaling_factor,
            use_bidirectional_attention=use_bidirectional_attention,
            logit_soft_cap=logit_soft_cap,
            use_sliding_window_attention=use_sliding_window_attention,
            sliding_window_size=sliding_window_size,
            dropout=dropout,
            dtype=self.dtype_policy,
            name="attention",
        )
        self.post_attention_norm = (
            norm("post_attention_norm") if use_post_attention_norm else None
        )
        self.pre_ffw_norm = norm("pre_ffw_norm")
        self.gating_ffw = dense("btd,df->btf", intermediate_dim, "ffw_gating")
        self.gating_ffw_2 = dense(
            "btd,df->btf", intermediate_dim, "ffw_gating_2"
        )
        self.ffw_linear = dense("btf,fd->btd", hidden_dim, "ffw_linear")
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
        ffw_shape = (*input_shape[:-1], self.intermediate_dim)
        self.pre_attention_norm.build(input_shape)
        self.attention.build(input_shape)
        if self.post_attention_norm is not None:
            self.post_attention_norm.build(input_shape)
        self.pre_ffw_norm.build(input_shape)
        self.gating_ffw.build(input_shape)
        self.gating_ffw_2.build(input_shape)
        self.ffw_linear.build(ffw_shape)
        if self.post_ffw_norm is not None:
            self.post_ffw_norm.build(input_shape)

    def _attention_mask(self, inputs, padding_mask):
        """Boolean `(batch, seq, seq)` mask of allowed query/key pairs."""
        batch, seq_len = ops.shape(inputs)[0], ops.shape(inputs)[1]
        if self.use_bidirectional_attention:
            if padding_mask is None:
                return ops.ones((batch, seq_len, seq_len), "bool")
            # Real tokens attend to real tokens; padded rows get no keys.
            valid = ops.cast(padding_mask, "bool")
            return ops.logical_and(valid[:, :, None], valid[:, None, :])
        positions = ops.arange(seq_len, dtype="int32")
        causal = ops.expand_dims(positions[:, None] >= positions[None, :], 0)
        if padding_mask is None:
            return ops.broadcast_to(causal, (batch, seq_len, seq_len))
        keys = ops.cast(padding_mask, "bool")[:, None, :]
        return ops.logical_and(causal, keys)

    def call(self, inputs, padding_mask=None, training=None):
        mask = self._attention_mask(inputs, padding_mask)

        x = self.pre_attention_norm(inputs)
        x = self.attention(x, attention_mask=mask, training=training)
        if self.post_attention_norm is not None:
            x = self.post_attention_norm(x)
        if self.dropout > 0:
            x = self.attention_dropout(x, training=training)
        residual = inputs + x

        x = self.pre_ffw_norm(residual)
        gate = keras.activations.gelu(self.gating_ffw(x), approximate=True)
        x = self.ffw_linear(gate * self.gating_ffw_2(x))
        if self.post_ffw_norm is not None:
            x = self.post_ffw_norm(x)
        if self.dropout > 0:
            x = self.ffw_dropout(x, training=training)
        return residual + x

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "head_dim": self.head_dim,
                "num_query_heads": self.num_query_heads,
                "num_key_value_heads": self.num_key_value_heads,
                "query_head_dim_normalize": self.query_head_dim_normalize,
                "use_query_key_norm": self.use_query_key_norm,
                "use_post_ffw_norm": self.use_post_ffw_norm,
                "use_post_attention_norm": self.use_post_attention_norm,
                "logit_soft_cap": self.logit_soft_cap,
                "use_sliding_window_attention": (
                    self.use_sliding_window_attention
                ),
                "sliding_window_size": self.sliding_window_size,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "rope_wavelength": self.rope_wavelength,
                "rope_scaling_factor": self.rope_scaling_factor,
                "use_bidirectional_attention": (
                    self.use_bidirectional_attention
                ),
                "dropout": self.dropout,
            }
        )
        return config
