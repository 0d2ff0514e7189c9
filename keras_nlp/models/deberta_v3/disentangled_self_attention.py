"""DeBERTa's disentangled self-attention over bucketed relative positions."""

import math

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_einsum_dims
from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import MODEL
from keras_nlp.layers.dense import fresh_initializer
from keras_nlp.layers.grouped_query_attention import grouped_query_attention
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.models.construction import check_heads_divide

# Query, key and value kernels `(hidden, heads, head_dim)`; the output
# kernel reads the heads concatenated, `(heads * head_dim, hidden)`.
PROJECTION_DIMS = ("hidden", "heads", "head_dim")
OUTPUT_DIMS = ("heads", "hidden")
# Content-to-content, content-to-position and position-to-content logits
# are summed, each scaled by `1 / sqrt(3 * head_dim)`.
_NUM_LOGIT_TERMS = 3


def relative_position_index(length, bucket_size, max_sequence_length):
    """Row of the relative table for each (query, key) pair, `(q, k)` int32.

    The offset `q - k` is kept as is up to `bucket_size // 2` in absolute
    value; beyond, offsets share buckets on a log scale that reaches
    `bucket_size - 1` at `max_sequence_length - 1`. The bucket is then
    shifted by `bucket_size` and clipped into the table's
    `2 * bucket_size` rows.

    Args:
        length: int or scalar tensor, the sequence length.
        bucket_size: int. Half the rows of the relative table.
        max_sequence_length: int. The offset that maps to the last bucket.
    """
    positions = ops.arange(length, dtype="int32")
    offsets = positions[:, None] - positions[None, :]
    distance = ops.abs(offsets)
    mid = bucket_size // 2
    # float32 in this order (log of the ratio, times `mid - 1`, over the
    # log of the span), as the checkpoints' reference computes it: `ceil`
    # turns a one-ulp difference into a different bucket.
    ratio = ops.cast(ops.maximum(distance, mid), "float32") / float(mid)
    span = ops.log(ops.cast(max_sequence_length - 1, "float32") / float(mid))
    scaled = ops.log(ratio) * float(mid - 1)
    far = ops.cast(ops.ceil(scaled / span), "int32") + mid
    buckets = ops.where(distance <= mid, offsets, ops.sign(offsets) * far)
    return ops.clip(buckets + bucket_size, 0, 2 * bucket_size - 1)


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class DisentangledSelfAttention(keras.layers.Layer):
    """Multi-head self-attention with DeBERTa's relative-position terms.

    The logits of query `i` and key `j` in each head sum three terms, each
    scaled by `1 / sqrt(3 * head_dim)`: content to content `q_i . k_j`,
    content to position `q_i . K_r` and position to content `k_j . Q_r`,
    where `r = relative_position_index(...)[i, j]` and `K_r`, `Q_r` are
    row `r` of the relative table through this layer's own key and query
    projections (biases included). The heads' outputs, concatenated, go
    through `attention_output`.

    Args:
        num_heads: int. Attention heads; must divide `hidden_dim`.
        hidden_dim: int. Width of the inputs and outputs.
        max_sequence_length: int. Offset of the last relative bucket.
            Defaults to `512`.
        bucket_size: int. Half the rows of the relative table. Defaults to
            `256`.
        dropout: float. Dropout on the relative table and on the attention
            probabilities in training. Defaults to `0.1`.
        kernel_initializer: initializer of the kernels.
        bias_initializer: initializer of the biases.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`).

    Call arguments:
        inputs: `(batch, seq, hidden_dim)`.
        rel_embeddings: `(2 * bucket_size, hidden_dim)`, the relative
            table (already normalized).
        attention_mask: optional boolean `(batch, seq, seq)`.
        training: bool. Enables dropout.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.deberta_v3.disentangled_self_attention import (
        DisentangledSelfAttention,
    )

    attention = DisentangledSelfAttention(
        num_heads=2, hidden_dim=8, max_sequence_length=16, bucket_size=4
    )
    x = np.random.rand(1, 10, 8).astype("float32")
    table = np.random.rand(8, 8).astype("float32")
    attention(x, rel_embeddings=table).shape  # (1, 10, 8)
    ```
    """

    def __init__(
        self,
        num_heads,
        hidden_dim,
        max_sequence_length=512,
        bucket_size=256,
        dropout=0.1,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_heads_divide(hidden_dim, num_heads)
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.max_sequence_length = max_sequence_length
        self.bucket_size = bucket_size
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.head_dim = hidden_dim // num_heads
        self.scale = 1.0 / math.sqrt(_NUM_LOGIT_TERMS * self.head_dim)

        self.query_dense = self._projection("query")
        self.key_dense = self._projection("key")
        self.value_dense = self._projection("value")
        self.output_dense = declare_einsum_dims(
            keras.layers.EinsumDense(
                "btf,fd->btd",
                output_shape=(None, hidden_dim),
                bias_axes="d",
                **self._initializers(),
                dtype=self.dtype_policy,
                name="attention_output",
            ),
            f="heads",
            d="hidden",
        )
        self.position_dropout = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="position_dropout"
        )
        self.probabilities_dropout = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="attention_dropout"
        )

    def _initializers(self):
        return dict(
            kernel_initializer=fresh_initializer(self.kernel_initializer),
            bias_initializer=fresh_initializer(self.bias_initializer),
        )

    def _projection(self, name):
        dense = keras.layers.EinsumDense(
            "btd,dnh->btnh",
            output_shape=(None, self.num_heads, self.head_dim),
            bias_axes="nh",
            **self._initializers(),
            dtype=self.dtype_policy,
            name=name,
        )
        return declare_einsum_dims(dense, d="hidden", n="heads", h="head_dim")

    def build(self, input_shape):
        for dense in (self.query_dense, self.key_dense, self.value_dense):
            dense.build(input_shape)
        self.output_dense.build(input_shape)

    def call(self, inputs, rel_embeddings, attention_mask=None, training=None):
        query = self.query_dense(inputs)
        key = self.key_dense(inputs)
        value = self.value_dense(inputs)
        table = self.position_dropout(rel_embeddings, training=training)
        # The table through the same projections: `(2 * bucket, heads,
        # head_dim)`, computed once for the whole batch.
        position_query = self.query_dense(table[None])[0]
        position_key = self.key_dense(table[None])[0]

        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        index = relative_position_index(
            length, self.bucket_size, self.max_sequence_length
        )
        shape = (batch, self.num_heads, length, length)
        # Content to position: each query against every table row, then
        # the row of each key's offset picked, `(batch, heads, q, k)`.
        c2p = ops.einsum("bqnh,rnh->bnqr", query, position_key)
        c2p = ops.take_along_axis(c2p, ops.broadcast_to(index, shape), -1)
        # Position to content: each key against every table row, the row
        # of the same (query, key) offset picked, then keys moved last.
        p2c = ops.einsum("bknh,rnh->bnkr", key, position_query)
        p2c = ops.take_along_axis(
            p2c, ops.broadcast_to(ops.transpose(index), shape), -1
        )
        p2c = ops.swapaxes(p2c, -1, -2)

        scale = ops.cast(self.scale, query.dtype)
        outputs = grouped_query_attention(
            query * scale,
            key,
            value,
            mask=attention_mask,
            probabilities_dropout=self.probabilities_dropout,
            training=training,
            bias=(c2p + p2c) * scale,
        )
        outputs = ops.reshape(outputs, (batch, length, self.hidden_dim))
        return self.output_dense(outputs)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "max_sequence_length": self.max_sequence_length,
                "bucket_size": self.bucket_size,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self.bias_initializer
                ),
            }
        )
        return config


def disentangled_attention_rules(prefix):
    """Layout rules of a `DisentangledSelfAttention` under `prefix`.

    Query, key and value kernels: heads on the model axis, hidden on the
    data axis; where the model axis does not divide the heads, hidden on
    both axes instead (a head is never split; their biases then fall back
    to replicated). The output kernel's first dimension is heads *
    head_dim concatenated, where a model-axis split could cut a head (12
    heads of 64 on 8 devices: 768 divides, 12 does not), so the model axis
    takes its output hidden dimension and the data axis (storage only,
    FSDP-style) its heads dimension.
    """
    projections = prefix + "(query|key|value)/"
    return [
        named_rule(
            projections + "kernel",
            PROJECTION_DIMS,
            {"heads": MODEL, "hidden": DATA},
            {"hidden": (DATA, MODEL)},
        ),
        named_rule(
            projections + "bias", ("heads", "head_dim"), {"heads": MODEL}
        ),
        named_rule(
            prefix + "attention_output/kernel",
            OUTPUT_DIMS,
            {"hidden": MODEL, "heads": DATA},
        ),
    ]
