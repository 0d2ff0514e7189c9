"""XLNet's layers: embeddings, the attention mask and the encoder block.

At inference keras-hub's `XLNetBackbone` runs the content stream alone:
its query stream (`mask_emb`, `target_mapping`) only serves
pretraining's permutation language modelling, so the blocks here compute
Transformer-XL relative self-attention with XLNet's segment term, and
`mask_emb` is kept as a weight, unused, for the checkpoints.
"""

import math

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.distribution.dims import declare_einsum_dims
from keras_nlp.layers.decoder_block import FEEDFORWARD_INPUT_DIMS
from keras_nlp.layers.decoder_block import FEEDFORWARD_OUTPUT_DIMS
from keras_nlp.layers.decoder_block import get_activation
from keras_nlp.layers.dense import fresh_initializer
from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.token_and_position_embedding import token_embedding

# Every projection, the output included, has a `(hidden, heads, head_dim)`
# kernel: the output reads `btnh,dnh->btd`, the transpose of the usual
# `(heads, head_dim, hidden)`.
KERNEL_DIMS = ("hidden", "heads", "head_dim")
HEAD_BIAS_DIMS = ("heads", "head_dim")
SEGMENT_ENCODING_DIMS = ("segment", "heads", "head_dim")
# `(1, 1, hidden)`: the query stream's initial state.
MASK_EMBEDDING_DIMS = ("mask_batch", "mask_position", "hidden")
_LEGEND = dict(d="hidden", n="heads", h="head_dim")
_MASKED = -1e9


def relative_encoding(length, hidden_dim, dtype):
    """Sinusoids of the offsets `length, length - 1, ..., 1 - length`.

    Row `c` encodes the offset `length - c` (query minus key position):
    `(2 * length, hidden_dim)`, sines then cosines.
    """
    offsets = ops.cast(length - ops.arange(2 * length), "float32")
    exponents = ops.cast(ops.arange(0, hidden_dim, 2), "float32") / hidden_dim
    angles = offsets[:, None] / (10000.0**exponents)[None, :]
    return ops.cast(
        ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1), dtype
    )


def relative_shift(scores):
    """`(b, n, t, 2t)` scores by encoding row -> `(b, n, t, t)` by key.

    Transformer-XL's shift: flattening each head's `(t, 2t)` scores and
    dropping the first `t` entries moves query `i`'s row left by `t - i`,
    so key `j` lands on the row of offset `i - j`.
    """
    shape = ops.shape(scores)
    length = shape[2]
    shifted = ops.reshape(scores, (shape[0], shape[1], 2 * length, length))
    shifted = ops.reshape(
        shifted[:, :, 1:, :], (shape[0], shape[1], length, 2 * length - 1)
    )
    return shifted[..., :length]


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class XLNetEmbedding(keras.layers.Layer):
    """Word embeddings and the relative encoding, both dropped out.

    Args:
        vocabulary_size: int. Rows of `word_embedding`.
        hidden_dim: int. Width of the embeddings and the encoding.
        dropout: float. Dropout rate on both, in training.
        initializer: initializer of the table.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`).

    Call arguments:
        token_ids: `(batch, seq)` int.

    Returns:
        `(batch, seq, hidden_dim)` embeddings and the
        `(2 * seq, hidden_dim)` relative encoding.
    """

    def __init__(
        self,
        vocabulary_size,
        hidden_dim,
        dropout=0.0,
        initializer="uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.hidden_dim = hidden_dim
        self.dropout = dropout
        self.word_embedding = token_embedding(
            vocabulary_size,
            hidden_dim,
            initializer=fresh_initializer(initializer),
            dtype=self.dtype_policy,
            name="word_embedding",
        )
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="dropout"
        )

    def build(self, input_shape):
        self.word_embedding.build(input_shape)

    def call(self, token_ids, training=None):
        words = self.word_embedding(token_ids)
        encoding = relative_encoding(
            ops.shape(token_ids)[1], self.hidden_dim, self.compute_dtype
        )
        return (
            self.dropout_layer(words, training=training),
            self.dropout_layer(encoding, training=training),
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "hidden_dim": self.hidden_dim,
                "dropout": self.dropout,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class XLNetAttentionMask(keras.layers.Layer):
    """The content stream's attention mask; owns the unused `mask_emb`.

    Query `i` sees every real key and itself, so a padded position's
    output is defined (as in keras-hub).

    Args:
        hidden_dim: int. Width of `mask_emb`, `(1, 1, hidden_dim)`.
        initializer: initializer of `mask_emb`.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`).

    Call arguments:
        padding_mask: `(batch, seq)`, non-zero for real tokens.

    Returns:
        Boolean `(batch, seq, seq)`.
    """

    def __init__(self, hidden_dim, initializer="uniform", **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.initializer = keras.initializers.get(initializer)
        declare_dims(self, mask_emb=MASK_EMBEDDING_DIMS)

    def build(self, input_shape):
        self.mask_emb = self.add_weight(
            shape=(1, 1, self.hidden_dim),
            initializer=fresh_initializer(self.initializer),
            name="mask_emb",
        )

    def call(self, padding_mask):
        length = ops.shape(padding_mask)[1]
        real_keys = ops.cast(padding_mask, "bool")[:, None, :]
        positions = ops.arange(length)
        itself = (positions[:, None] == positions[None, :])[None]
        return ops.logical_or(real_keys, itself)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_dim": self.hidden_dim,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class XLNetRelativeAttention(keras.layers.Layer):
    """Relative multi-head self-attention of the content stream.

    The logits sum a content term `(q + u) k`, a position term
    `(q + v) r_{i-j}` over the projected relative encoding and a segment
    term `(q + s) e_{same or not}`, scaled by `1 / sqrt(head_dim)`. No
    projection has a bias; the per-head biases `u, v, s` and the segment
    encodings `e` belong to the enclosing block and are passed in.

    Args:
        num_heads: int. Attention heads.
        head_dim: int. Width of each head.
        hidden_dim: int. Width of the inputs and outputs.
        kernel_initializer: initializer of every kernel.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`).
    """

    def __init__(
        self,
        num_heads,
        head_dim,
        hidden_dim,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.hidden_dim = hidden_dim
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

        def projection(name, equation="btd,dnh->btnh", output_shape=None):
            dense = keras.layers.EinsumDense(
                equation,
                output_shape=output_shape or (None, num_heads, head_dim),
                kernel_initializer=fresh_initializer(self.kernel_initializer),
                dtype=self.dtype_policy,
                name=name,
            )
            return declare_einsum_dims(dense, **_LEGEND)

        self.query_dense = projection("query")
        self.key_dense = projection("key")
        self.value_dense = projection("value")
        self.encoding_dense = projection(
            "encoding", "sd,dnh->snh", (num_heads, head_dim)
        )
        self.output_dense = projection(
            "attention_output", "btnh,dnh->btd", (None, hidden_dim)
        )

    def build(self, input_shape):
        for dense in (self.query_dense, self.key_dense, self.value_dense):
            dense.build(input_shape)
        self.encoding_dense.build((None, self.hidden_dim))
        self.output_dense.build(
            (*input_shape[:-1], self.num_heads, self.head_dim)
        )

    def call(
        self,
        x,
        encoding,
        attention_mask,
        different_segments,
        content_bias,
        position_bias,
        segment_bias,
        segment_encoding,
    ):
        query = self.query_dense(x)
        key = self.key_dense(x)
        value = self.value_dense(x)
        position = self.encoding_dense(encoding)
        content = ops.einsum("btnh,bsnh->bnts", query + content_bias, key)
        by_offset = ops.einsum(
            "btnh,snh->bnts", query + position_bias, position
        )
        # Logits against "same segment" (0) and "different" (1).
        segment = ops.einsum(
            "btnh,snh->bnts", query + segment_bias, segment_encoding
        )
        segment = ops.where(
            different_segments[:, None], segment[..., 1:], segment[..., :1]
        )
        logits = (content + relative_shift(by_offset) + segment) / math.sqrt(
            self.head_dim
        )
        logits = ops.where(
            attention_mask[:, None], logits, ops.cast(_MASKED, logits.dtype)
        )
        weights = ops.softmax(logits, axis=-1)
        return self.output_dense(ops.einsum("bnts,bsnh->btnh", weights, value))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "head_dim": self.head_dim,
                "hidden_dim": self.hidden_dim,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class XLNetEncoderBlock(keras.layers.Layer):
    """Post-norm block: relative attention, then a feed-forward.

        h = layer_norm_rel_attn(x + dropout(rel_attn(x)))
        y = layer_norm_ff(h + dropout(output(dropout(act(intermediate(h))))))

    Owns the per-head biases (`content_attention_bias`,
    `positional_attention_bias`, `segment_attention_bias`, each
    `(heads, head_dim)`) and `segment_encoding` `(2, heads, head_dim)`.

    Args:
        num_heads: int. Attention heads; `hidden_dim // num_heads` wide.
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of the feed-forward.
        dropout: float. Dropout rate of both branches, in training.
        activation: str. The feed-forward activation.
        layer_norm_epsilon: float. Epsilon of both LayerNorms.
        kernel_initializer: initializer of the kernels and the segment
            encoding.
        bias_initializer: initializer of the per-head attention biases
            (the feed-forward's biases start at zero, as in keras-hub).
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`).

    Call arguments:
        x: `(batch, seq, hidden)`.
        encoding: `(2 * seq, hidden)` relative encoding.
        attention_mask: boolean `(batch, seq, seq)`.
        different_segments: boolean `(batch, seq, seq)`, true where the
            query's and key's segment ids differ.
        training: bool. Enables dropout.
    """

    def __init__(
        self,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.0,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.head_dim = hidden_dim // num_heads
        self.rel_attn = XLNetRelativeAttention(
            num_heads,
            self.head_dim,
            hidden_dim,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="rel_attn",
        )
        self.layer_norm_rel_attn = self._norm("layer_norm_rel_attn")
        self.layer_norm_ff = self._norm("layer_norm_ff")
        dense_options = dict(
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
        )
        self.intermediate_dense = named_dense(
            intermediate_dim,
            FEEDFORWARD_INPUT_DIMS,
            activation=get_activation(activation),
            name="feedforward_intermediate_dense",
            **dense_options,
        )
        self.output_dense = named_dense(
            hidden_dim,
            FEEDFORWARD_OUTPUT_DIMS,
            name="feedforward_output_dense",
            **dense_options,
        )
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="dropout"
        )
        declare_dims(
            self,
            content_attention_bias=HEAD_BIAS_DIMS,
            positional_attention_bias=HEAD_BIAS_DIMS,
            segment_attention_bias=HEAD_BIAS_DIMS,
            segment_encoding=SEGMENT_ENCODING_DIMS,
        )

    def _norm(self, name):
        return keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )

    def build(self, input_shape):
        self.rel_attn.build(input_shape)
        self.layer_norm_rel_attn.build(input_shape)
        self.layer_norm_ff.build(input_shape)
        self.intermediate_dense.build(input_shape)
        self.output_dense.build((*input_shape[:-1], self.intermediate_dim))
        # keras-hub's order within the block's own variables.
        heads = (self.num_heads, self.head_dim)
        for name in ("content", "positional", "segment"):
            setattr(
                self,
                f"{name}_attention_bias",
                self.add_weight(
                    shape=heads,
                    initializer=fresh_initializer(self.bias_initializer),
                    name=f"{name}_attention_bias",
                ),
            )
        self.segment_encoding = self.add_weight(
            shape=(2, *heads),
            initializer=fresh_initializer(self.kernel_initializer),
            name="segment_encoding",
        )

    def call(
        self, x, encoding, attention_mask, different_segments, training=None
    ):
        attended = self.rel_attn(
            x,
            encoding,
            attention_mask,
            different_segments,
            content_bias=self.content_attention_bias,
            position_bias=self.positional_attention_bias,
            segment_bias=self.segment_attention_bias,
            segment_encoding=self.segment_encoding,
        )
        x = self.layer_norm_rel_attn(
            x + self.dropout_layer(attended, training=training)
        )
        fed = self.dropout_layer(self.intermediate_dense(x), training=training)
        fed = self.dropout_layer(self.output_dense(fed), training=training)
        return self.layer_norm_ff(x + fed)

    def compute_output_shape(self, input_shape, *args, **kwargs):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self.bias_initializer
                ),
            }
        )
        return config
