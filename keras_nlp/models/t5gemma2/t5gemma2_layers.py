"""T5Gemma 2's decoder block: one attention over the decoder's own keys
and the encoder's, then a GeGLU feed-forward."""

import keras
from keras import ops

from keras_nlp.distribution.layout_map import pin_activation
from keras_nlp.distribution.layout_map import pin_input
from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.cached_attention import write_cache
from keras_nlp.layers.cross_attention_decoder_block import check_encoder_source
from keras_nlp.layers.fused_projection import project_together
from keras_nlp.layers.grouped_query_attention import grouped_query_attention
from keras_nlp.models.t5gemma.t5gemma_layers import T5GemmaDecoderBlock
from keras_nlp.models.t5gemma.t5gemma_layers import _GemmaStyleBlock


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class MergedSelfCrossAttention(CachedGroupedQueryAttention):
    """Self- and cross-attention in one softmax (T5Gemma 2's decoder).

    Queries come from the decoder. The keys and values are the decoder's
    own (normalized and rotated, causal, in the window if any) followed by
    the encoder's outputs' (`key_value_cache`, projected by the same key
    and value kernels and normalized, not rotated), all in one softmax.
    The cross-attention keys and values share the self-attention's kernels
    and so their layout.

    Args: those of `CachedGroupedQueryAttention`, which must have a rotary
    embedding.

    Call arguments:
        inputs: `(batch, seq, hidden)`.
        attention_mask: boolean `(batch, seq, self_key_len)` over the
            decoder's keys (causal and padding).
        key_value_cache: `(batch, 2, source_len, kv_heads, head_dim)`, the
            encoder's keys and values (`key_value_cache()`).
        cross_attention_mask: optional boolean `(batch, seq, source_len)`
            over the encoder's keys.
        cache, cache_update_index: the self-attention's cache, as
            `CachedGroupedQueryAttention`'s.
        training: bool. Enables dropout.

    Returns:
        `(batch, seq, hidden)`, or `(outputs, cache)` with a cache.
    """

    def call(
        self,
        inputs,
        attention_mask=None,
        key_value_cache=None,
        cross_attention_mask=None,
        cache=None,
        cache_update_index=None,
        training=None,
    ):
        start_index = 0 if cache_update_index is None else cache_update_index
        query, key, value = project_together(
            inputs, [self.query_dense, self.key_dense, self.value_dense]
        )
        if self.use_query_key_norm:
            query = self.query_norm(query)
            key = self.key_norm(key)
        query = self.rotary_embedding(query, start_index=start_index)
        key = self.rotary_embedding(key, start_index=start_index)
        key = pin_activation(self, "keys", key)
        value = pin_activation(self, "keys", value)
        if cache is not None:
            key, value, cache = write_cache(cache, key, value, start_index)
        window, _ = self._position_mask_and_bias(
            ops.shape(query)[1], ops.shape(key)[1], start_index
        )
        shape = ops.shape(query)
        self_mask = ops.ones((shape[0], shape[1], ops.shape(key)[1]), "bool")
        if attention_mask is not None:
            self_mask = ops.logical_and(
                self_mask, ops.cast(attention_mask, "bool")
            )
        if window is not None:
            self_mask = ops.logical_and(self_mask, window)
        source_length = ops.shape(key_value_cache)[2]
        cross_mask = ops.ones((shape[0], shape[1], source_length), "bool")
        if cross_attention_mask is not None:
            cross_mask = ops.cast(cross_attention_mask, "bool")
        keys = ops.concatenate([key, key_value_cache[:, 0]], axis=1)
        values = ops.concatenate([value, key_value_cache[:, 1]], axis=1)
        mask = ops.concatenate([self_mask, cross_mask], axis=-1)
        query = query * ops.cast(self.query_scale, query.dtype)
        outputs = grouped_query_attention(
            query,
            keys,
            values,
            mask,
            logit_soft_cap=self.logit_soft_cap,
            probabilities_dropout=(
                self.probabilities_dropout if self.dropout > 0 else None
            ),
            training=training,
        )
        outputs = self.output_dense(pin_input(self.output_dense, outputs))
        return outputs if cache is None else (outputs, cache)


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class T5Gemma2DecoderBlock(_GemmaStyleBlock):
    """Merged self- and cross-attention, then a GeGLU feed-forward.

        h = x + post_norm(merged_attention(pre_norm(x), encoder))
        y = h + post_feedforward_norm(mlp(pre_feedforward_norm(h)))

    The norms are keras-hub's `decoder_pre_self_attention_layernorm`,
    `decoder_post_self_attention_layernorm`,
    `decoder_pre_feedforward_layernorm` and
    `decoder_post_feedforward_layernorm`. `self_attention` and
    `cross_attention` both name the one `merged_attention` (whose key
    kernel both caches follow), so the sequence-to-sequence task plans
    and fills both caches as for `T5GemmaDecoderBlock`.

    Args:
        attention: a `MergedSelfCrossAttention` named `merged_attention`.
        intermediate_dim: int. Width of each feed-forward branch.
        **kwargs: `hidden_activation`, `layer_norm_epsilon`, `dropout`,
            `kernel_initializer` as `T5GemmaEncoderBlock`'s, and
            `keras.layers.Layer`'s (`name`, `dtype`, ...).

    Call arguments: those of `T5GemmaDecoderBlock`.
    """

    attention_attributes = ("merged_attention",)

    def __init__(self, attention, intermediate_dim, **kwargs):
        super().__init__(intermediate_dim, **kwargs)
        self.merged_attention = attention
        prefix = "decoder_"
        self.pre_self_norm = self._norm(prefix + "pre_self_attention_layernorm")
        self.post_self_norm = self._norm(
            prefix + "post_self_attention_layernorm"
        )
        self.pre_feedforward_norm = self._norm(
            prefix + "pre_feedforward_layernorm"
        )
        self.post_feedforward_norm = self._norm(
            prefix + "post_feedforward_layernorm"
        )

    @property
    def self_attention(self):
        return self.merged_attention

    @property
    def cross_attention(self):
        return self.merged_attention

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        shape = decoder_sequence_shape
        self.merged_attention.build(shape)
        self.pre_self_norm.build(shape)
        self.post_self_norm.build(shape)
        self.mlp.build(shape)
        self.pre_feedforward_norm.build(shape)
        self.post_feedforward_norm.build(shape)

    cross_attention_cache = T5GemmaDecoderBlock.cross_attention_cache
    _self_mask = T5GemmaDecoderBlock._self_mask

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
        if cross_attention_cache is None:
            cross_attention_cache = self.cross_attention_cache(encoder_sequence)
        start_index = 0
        cache_kwargs = {}
        if self_attention_cache is not None:
            start_index = self_attention_cache_update_index
            cache_kwargs = dict(
                cache=self_attention_cache, cache_update_index=start_index
            )
        self_mask = self._self_mask(
            decoder_sequence,
            decoder_padding_mask,
            self_attention_cache,
            start_index,
        )
        cross_mask = None
        if encoder_padding_mask is not None:
            keys = ops.cast(encoder_padding_mask, "bool")[:, None, :]
            shape = ops.shape(encoder_padding_mask)
            cross_mask = ops.broadcast_to(
                keys, (shape[0], ops.shape(decoder_sequence)[1], shape[1])
            )
        updated = []

        def attend(y):
            y = self.merged_attention(
                y,
                attention_mask=self_mask,
                key_value_cache=cross_attention_cache,
                cross_attention_mask=cross_mask,
                training=training,
                **cache_kwargs,
            )
            if self_attention_cache is not None:
                y, cache = y
                updated.append(cache)
            return y

        x = self._branch(
            decoder_sequence,
            self.pre_self_norm,
            self.post_self_norm,
            attend,
            training,
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
