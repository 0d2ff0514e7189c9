"""Gemma 3 self-attention: Gemma attention plus q/k norms and RoPE options."""

from keras import ops

from keras_nlp.layers.grouped_query_attention import grouped_query_attention
from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)
from keras_nlp.models.gemma.gemma_attention import GemmaAttention


class Gemma3Attention(GemmaAttention):
    """`GemmaAttention` with Gemma 3's query/key norms and per-layer RoPE.

    On top of `GemmaAttention`, queries and keys may be RMS-normalized over
    each head (`1 + scale` gain, variables `query_norm/scale` and
    `key_norm/scale` of shape `(head_dim,)`) after their projection and
    before the rotary embedding, and the rotary embedding's base wavelength
    and position scaling are set per layer (Gemma 3 uses 10k for local and
    1M for global layers).

    Args:
        num_query_heads: int. Number of query heads.
        num_key_value_heads: int. Number of key/value heads; must divide
            `num_query_heads`.
        head_dim: int. Size of every query, key and value head.
        query_head_dim_normalize: bool. If `True` queries are scaled by
            `head_dim ** -0.5`, otherwise by
            `(hidden_dim // num_query_heads) ** -0.5`. Defaults to `True`.
        use_query_key_norm: bool. RMS-normalize every query and key head.
            Defaults to `False`.
        layer_norm_epsilon: float. Epsilon of the query/key norms. Defaults
            to `1e-6`.
        rope_wavelength: float. Base wavelength of the rotary embedding.
            Defaults to `10000.0`.
        rope_scaling_factor: float. Positions are divided by this factor in
            the rotary embedding. Defaults to `1.0`.
        use_bidirectional_attention: bool. Only changes the sliding window:
            if `True` it is centered on the query (`window // 2` keys after
            it, the rest before it) instead of looking back only. Defaults
            to `False`.
        logit_soft_cap: float or `None`. If set, attention logits are
            squashed to `cap * tanh(logits / cap)` before the softmax.
        use_sliding_window_attention: bool. Restrict attention to a window.
        sliding_window_size: int. Width of the window.
        dropout: float. Dropout rate on the attention probabilities.
        **kwargs: Forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: Tensor of shape `(batch, seq, hidden_dim)`.
        attention_mask: Optional boolean/integer tensor of shape
            `(batch, seq, seq)`; entry `[b, i, j]` says whether query `i` may
            attend to key `j`. Query rows without any allowed key output
            zeros.
        training: bool. Enables dropout.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.gemma3.gemma3_attention import Gemma3Attention

    layer = Gemma3Attention(
        num_query_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        use_query_key_norm=True,
        rope_wavelength=1_000_000.0,
    )
    outputs = layer(np.ones((2, 5, 32), "float32"))  # shape (2, 5, 32)
    ```
    """

    def __init__(
        self,
        num_query_heads,
        num_key_value_heads,
        head_dim,
        query_head_dim_normalize=True,
        use_query_key_norm=False,
        layer_norm_epsilon=1e-6,
        rope_wavelength=10_000.0,
        rope_scaling_factor=1.0,
        use_bidirectional_attention=False,
        logit_soft_cap=None,
        use_sliding_window_attention=False,
        sliding_window_size=4096,
        dropout=0,
        **kwargs,
    ):
        super().__init__(
            num_query_heads=num_query_heads,
            num_key_value_heads=num_key_value_heads,
            head_dim=head_dim,
            query_head_dim_normalize=query_head_dim_normalize,
            logit_soft_cap=logit_soft_cap,
            use_sliding_window_attention=use_sliding_window_attention,
            sliding_window_size=sliding_window_size,
            dropout=dropout,
            **kwargs,
        )
        self.use_query_key_norm = use_query_key_norm
        self.layer_norm_epsilon = layer_norm_epsilon
        self.rope_wavelength = rope_wavelength
        self.rope_scaling_factor = rope_scaling_factor
        self.use_bidirectional_attention = use_bidirectional_attention

    def build(self, input_shape):
        super().build(input_shape)
        # The parent's rotary layer holds no weights; give it this layer's
        # wavelength and scaling instead of its 10k default.
        self.rotary_embedding.max_wavelength = self.rope_wavelength
        self.rotary_embedding.scaling_factor = self.rope_scaling_factor
        if self.use_query_key_norm:
            heads_shape = (None, None, None, self.head_dim)
            self.query_norm = ZeroCenteredRMSNormalization(
                epsilon=self.layer_norm_epsilon,
                dtype=self.dtype_policy,
                name="query_norm",
            )
            self.query_norm.build(heads_shape)
            self.key_norm = ZeroCenteredRMSNormalization(
                epsilon=self.layer_norm_epsilon,
                dtype=self.dtype_policy,
                name="key_norm",
            )
            self.key_norm.build(heads_shape)

    def _sliding_window_mask(self, query_len, key_len):
        if not self.use_bidirectional_attention:
            return super()._sliding_window_mask(query_len, key_len)
        # Centered window of `sliding_window_size` positions: the query,
        # `size // 2` keys after it and the remaining ones before it.
        after = self.sliding_window_size // 2
        before = self.sliding_window_size - after - 1
        i = ops.arange(query_len, dtype="int32")[:, None]
        j = ops.arange(key_len, dtype="int32")[None, :]
        window = ops.logical_and(i - j <= before, j - i <= after)
        return ops.expand_dims(window, axis=0)

    def call(self, inputs, attention_mask=None, training=None):
        # Same as `GemmaAttention.call` except for the query/key norms, which
        # sit between the projections and the rotary embedding.
        query = self.query_dense(inputs)
        key = self.key_dense(inputs)
        if self.use_query_key_norm:
            query = self.query_norm(query)
            key = self.key_norm(key)
        query = self.rotary_embedding(query)
        key = self.rotary_embedding(key)
        value = self.value_dense(inputs)

        mask = None
        if attention_mask is not None:
            attention_mask = ops.cast(attention_mask, "bool")
            mask = attention_mask
        if self.use_sliding_window_attention:
            window = self._sliding_window_mask(
                ops.shape(query)[1], ops.shape(key)[1]
            )
            mask = window if mask is None else ops.logical_and(mask, window)

        query = query * ops.cast(self._query_scale(), query.dtype)
        outputs = grouped_query_attention(
            query,
            key,
            value,
            mask,
            logit_soft_cap=self.logit_soft_cap,
            probabilities_dropout=(
                self.probabilities_dropout if self.dropout > 0 else None
            ),
            training=training,
        )

        if attention_mask is not None:
            # Rows that may attend to nothing (left padding) are zeroed; the
            # check ignores the sliding window, like keras-hub.
            has_keys = ops.any(attention_mask, axis=-1)[:, :, None, None]
            outputs = ops.where(has_keys, outputs, ops.zeros_like(outputs))
        return self.output_dense(outputs)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "use_query_key_norm": self.use_query_key_norm,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "rope_wavelength": self.rope_wavelength,
                "rope_scaling_factor": self.rope_scaling_factor,
                "use_bidirectional_attention": (
                    self.use_bidirectional_attention
                ),
            }
        )
        return config
