"""One Gemma transformer block: attention and a GeGLU feed-forward."""

import keras
from keras import ops

from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)
from keras_nlp.models.gemma.gemma_attention import GemmaAttention


class GemmaDecoderBlock(keras.layers.Layer):
    """Pre-norm causal decoder block with optional Gemma 2 post-norms.

    Computes

        h = x + post_attention_norm(attention(pre_attention_norm(x)))
        y = h + post_ffw_norm(ffw(pre_ffw_norm(h)))

    where the post-norms are identities unless enabled and
    `ffw(z) = ffw_linear(gelu(ffw_gating(z)) * ffw_gating_2(z))` with the
    tanh approximation of GELU. Attention is causal and ignores padded keys.

    Args:
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Twice the width of each feed-forward branch
            (Gemma's convention: the two gating kernels are
            `(hidden_dim, intermediate_dim // 2)`).
        head_dim: int. Size of every attention head.
        num_query_heads: int. Number of query heads.
        num_key_value_heads: int. Number of key/value heads.
        query_head_dim_normalize: bool. See `GemmaAttention`.
        use_post_ffw_norm: bool. Normalize the feed-forward output before the
            residual add.
        use_post_attention_norm: bool. Normalize the attention output before
            the residual add.
        logit_soft_cap: float or `None`. Attention logit soft cap.
        use_sliding_window_attention: bool. Restrict attention to a window.
        sliding_window_size: int. Width of the window.
        layer_norm_epsilon: float. Epsilon of every normalization.
        dropout: float. Dropout on attention probabilities and on the outputs
            of the attention and feed-forward sub-blocks.
        **kwargs: Forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: Tensor of shape `(batch, seq, hidden_dim)`.
        padding_mask: Optional `(batch, seq)` tensor, non-zero for real
            tokens.
        training: bool. Enables dropout.
    """

    def __init__(
        self,
        hidden_dim,
        intermediate_dim,
        head_dim,
        num_query_heads,
        num_key_value_heads,
        query_head_dim_normalize=True,
        use_post_ffw_norm=False,
        use_post_attention_norm=False,
        logit_soft_cap=None,
        use_sliding_window_attention=False,
        sliding_window_size=4096,
        layer_norm_epsilon=1e-6,
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
        self.use_post_ffw_norm = use_post_ffw_norm
        self.use_post_attention_norm = use_post_attention_norm
        self.logit_soft_cap = logit_soft_cap
        self.use_sliding_window_attention = use_sliding_window_attention
        self.sliding_window_size = sliding_window_size
        self.layer_norm_epsilon = layer_norm_epsilon
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
        self.attention = self._make_attention()
        self.post_attention_norm = (
            norm("post_attention_norm") if use_post_attention_norm else None
        )
        self.pre_ffw_norm = norm("pre_ffw_norm")
        self.gating_ffw = dense("btd,df->btf", self._ffw_width(), "ffw_gating")
        self.gating_ffw_2 = dense(
            "btd,df->btf", self._ffw_width(), "ffw_gating_2"
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

    def _ffw_width(self):
        """Width of each feed-forward branch: half of `intermediate_dim`."""
        return self.intermediate_dim // 2

    def _make_attention(self):
        """The attention sub-layer; variants (Gemma 3) override this."""
        return GemmaAttention(
            num_query_heads=self.num_query_heads,
            num_key_value_heads=self.num_key_value_heads,
            head_dim=self.head_dim,
            query_head_dim_normalize=self.query_head_dim_normalize,
            logit_soft_cap=self.logit_soft_cap,
            use_sliding_window_attention=self.use_sliding_window_attention,
            sliding_window_size=self.sliding_window_size,
            dropout=self.dropout,
            dtype=self.dtype_policy,
            name="attention",
        )

    def build(self, input_shape):
        ffw_shape = (*input_shape[:-1], self._ffw_width())
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
        """Boolean `(batch, seq, seq)` mask: causal and no padded keys."""
        seq_len = ops.shape(inputs)[1]
        positions = ops.arange(seq_len, dtype="int32")
        causal = positions[:, None] >= positions[None, :]
        mask = ops.expand_dims(causal, axis=0)
        if padding_mask is None:
            return ops.broadcast_to(
                mask, (ops.shape(inputs)[0], seq_len, seq_len)
            )
        keys = ops.cast(padding_mask, "bool")[:, None, :]
        return ops.logical_and(mask, keys)

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
                "use_post_ffw_norm": self.use_post_ffw_norm,
                "use_post_attention_norm": self.use_post_attention_norm,
                "logit_soft_cap": self.logit_soft_cap,
                "use_sliding_window_attention": (
                    self.use_sliding_window_attention
                ),
                "sliding_window_size": self.sliding_window_size,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "dropout": self.dropout,
            }
        )
        return config
