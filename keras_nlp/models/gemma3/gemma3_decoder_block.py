"""One Gemma 3 transformer block: attention and a GeGLU feed-forward."""

from keras import ops

from keras_nlp.models.gemma.gemma_decoder_block import GemmaDecoderBlock
from keras_nlp.models.gemma3.gemma3_attention import Gemma3Attention


class Gemma3DecoderBlock(GemmaDecoderBlock):
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
        # Read by `_make_attention` during the parent's constructor.
        self.use_query_key_norm = use_query_key_norm
        self.rope_wavelength = rope_wavelength
        self.rope_scaling_factor = rope_scaling_factor
        self.use_bidirectional_attention = use_bidirectional_attention
        super().__init__(
            hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            head_dim=head_dim,
            num_query_heads=num_query_heads,
            num_key_value_heads=num_key_value_heads,
            query_head_dim_normalize=query_head_dim_normalize,
            use_post_ffw_norm=use_post_ffw_norm,
            use_post_attention_norm=use_post_attention_norm,
            logit_soft_cap=logit_soft_cap,
            use_sliding_window_attention=use_sliding_window_attention,
            sliding_window_size=sliding_window_size,
            layer_norm_epsilon=layer_norm_epsilon,
            dropout=dropout,
            **kwargs,
        )

    def _ffw_width(self):
        # Unlike Gemma, `intermediate_dim` is the width of each branch.
        return self.intermediate_dim

    def _make_attention(self):
        return Gemma3Attention(
            num_query_heads=self.num_query_heads,
            num_key_value_heads=self.num_key_value_heads,
            head_dim=self.head_dim,
            query_head_dim_normalize=self.query_head_dim_normalize,
            use_query_key_norm=self.use_query_key_norm,
            layer_norm_epsilon=self.layer_norm_epsilon,
            rope_wavelength=self.rope_wavelength,
            rope_scaling_factor=self.rope_scaling_factor,
            use_bidirectional_attention=self.use_bidirectional_attention,
            logit_soft_cap=self.logit_soft_cap,
            use_sliding_window_attention=self.use_sliding_window_attention,
            sliding_window_size=self.sliding_window_size,
            dropout=self.dropout,
            dtype=self.dtype_policy,
            name="attention",
        )

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

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "use_query_key_norm": self.use_query_key_norm,
                "rope_wavelength": self.rope_wavelength,
                "rope_scaling_factor": self.rope_scaling_factor,
                "use_bidirectional_attention": (
                    self.use_bidirectional_attention
                ),
            }
        )
        return config
