"""Learned absolute position embeddings, alone or summed with tokens.

GPT-2, OPT, BERT-style encoders, BART and Whisper add a trained
`(max_sequence_length, hidden)` table to the token embeddings. Keras has the
token side (`ReversibleEmbedding`) but no position table, hence these layers.
"""

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.layers.common import check_positive_ints

# What each dimension of the embedding tables is.
TOKEN_EMBEDDING_DIMS = ("vocab", "hidden")
REVERSE_EMBEDDING_DIMS = ("hidden", "vocab")
POSITION_EMBEDDING_DIMS = ("position", "hidden")
SEGMENT_EMBEDDING_DIMS = ("segment", "hidden")


def token_embedding(
    vocabulary_size,
    hidden_dim,
    tie_weights=True,
    initializer=None,
    dtype=None,
    name="token_embedding",
):
    """Keras's `ReversibleEmbedding`, with its dimensions declared.

    `embeddings` is `(vocab, hidden)`; the untied output projection
    `reverse_embeddings` (when `tie_weights=False`) is `(hidden, vocab)`.

    Args:
        vocabulary_size: int. Rows of the table.
        hidden_dim: int. Width of each embedding.
        tie_weights: bool. Reuse the table as the output projection.
        initializer: initializer of the tables; defaults to
            `RandomNormal(stddev=0.01)`, as the decoder checkpoints' configs.
        dtype: dtype or `keras.DTypePolicy`.
        name: the layer name (the variables' path prefix).

    Example:

    ```python
    from keras_nlp.layers import token_embedding

    embedding = token_embedding(128, 32, tie_weights=False)
    embedding.build((None, None))
    embedding.reverse_embeddings.shape  # (32, 128)
    ```
    """
    layer = keras.layers.ReversibleEmbedding(
        input_dim=vocabulary_size,
        output_dim=hidden_dim,
        tie_weights=tie_weights,
        embeddings_initializer=(
            initializer or keras.initializers.RandomNormal(stddev=0.01)
        ),
        dtype=dtype,
        name=name,
    )
    return declare_dims(
        layer,
        embeddings=TOKEN_EMBEDDING_DIMS,
        reverse_embeddings=REVERSE_EMBEDDING_DIMS,
    )


def segment_embedding(
    num_segments,
    hidden_dim,
    initializer="uniform",
    dtype=None,
    name="segment_embedding",
):
    """Keras's `Embedding` of segment (token type) ids, dimensions declared.

    `embeddings` is `(segment, hidden)`: BERT-style encoders add one row
    per segment id to the token embeddings.

    Args:
        num_segments: int. Rows of the table (distinct segment ids).
        hidden_dim: int. Width of each embedding.
        initializer: initializer of the table.
        dtype: dtype or `keras.DTypePolicy`.
        name: the layer name (the variable's path prefix).

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers import segment_embedding

    segments = segment_embedding(2, 8)
    segments(np.array([[0, 0, 1]], "int32")).shape  # (1, 3, 8)
    ```
    """
    layer = keras.layers.Embedding(
        input_dim=num_segments,
        output_dim=hidden_dim,
        embeddings_initializer=initializer,
        dtype=dtype,
        name=name,
    )
    return declare_dims(layer, embeddings=SEGMENT_EMBEDDING_DIMS)


@keras.saving.register_keras_serializable(package="keras_nlp.layers")
class PositionEmbedding(keras.layers.Layer):
    """A trained embedding per position, shaped like its input.

    The variable `embeddings` has shape `(sequence_length, hidden)`; a call
    on `(batch, seq, hidden)` inputs returns rows `start_index` to
    `start_index + seq - 1` broadcast to the input shape. Only the input's
    shape is read, never its values.

    Args:
        sequence_length: int. Number of positions (rows of the table).
        initializer: initializer of the table. Defaults to
            `"glorot_uniform"`.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(batch, seq, hidden)`, e.g. token embeddings.
        start_index: int or scalar tensor, position of the first token
            (non-zero when decoding into a cache).
        positions: optional int `(batch, seq)` positions, one row of the
            table per token (left-padded prompts count from their first
            real token); overrides `start_index`.

    Returns:
        `(batch, seq, hidden)` position embeddings in the compute dtype.

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers.token_and_position_embedding import (
        PositionEmbedding,
    )

    positions = PositionEmbedding(sequence_length=16)
    positions(np.zeros((2, 5, 8), "float32")).shape  # (2, 5, 8)
    ```
    """

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        check_positive_ints(sequence_length=sequence_length)
        self.sequence_length = sequence_length
        self.initializer = keras.initializers.get(initializer)
        declare_dims(self, embeddings=POSITION_EMBEDDING_DIMS)

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.sequence_length, input_shape[-1]),
            initializer=self.initializer,
        )

    def call(self, inputs, start_index=0, positions=None):
        shape = ops.shape(inputs)
        if positions is not None:
            table = ops.cast(self.embeddings, self.compute_dtype)
            # Padding counts below 0; its rows are never attended to.
            rows = ops.maximum(ops.cast(positions, "int32"), 0)
            return ops.take(table, rows, axis=0)
        rows = ops.slice(
            ops.cast(self.embeddings, self.compute_dtype),
            (start_index, 0),
            (shape[-2], shape[-1]),
        )
        return ops.broadcast_to(rows, shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.sequence_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_nlp.layers")
class TokenAndPositionEmbedding(keras.layers.Layer):
    """Token embeddings plus learned position embeddings.

    Holds a `keras.layers.ReversibleEmbedding` named `token_embedding` and a
    `PositionEmbedding` named `position_embedding`, so the variable paths
    read `<name>/token_embedding/embeddings` and
    `<name>/position_embedding/embeddings` (OPT, RoBERTa, DistilBERT).

    Args:
        vocabulary_size: int. Rows of the token table.
        sequence_length: int. Rows of the position table.
        embedding_dim: int. Width of both tables.
        tie_weights: bool. Whether the token table's reverse projection
            reuses it (no `reverse_embeddings` variable). Defaults to `True`.
        embeddings_initializer: initializer of both tables. Defaults to
            `"uniform"`.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: int `(batch, seq)` token ids.
        start_index: int or scalar tensor, position of the first token.
        positions: optional int `(batch, seq)` positions (see
            `PositionEmbedding`); overrides `start_index`.

    Returns:
        `(batch, seq, embedding_dim)`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers.token_and_position_embedding import (
        TokenAndPositionEmbedding,
    )

    embeddings = TokenAndPositionEmbedding(
        vocabulary_size=100, sequence_length=16, embedding_dim=8
    )
    embeddings(np.array([[3, 1, 4, 1, 5]], "int32")).shape  # (1, 5, 8)
    ```
    """

    def __init__(
        self,
        vocabulary_size,
        sequence_length,
        embedding_dim,
        tie_weights=True,
        embeddings_initializer="uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.sequence_length = sequence_length
        self.embedding_dim = embedding_dim
        self.tie_weights = tie_weights
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer
        )
        # Keras initializers fix their seed when created; a fresh copy per
        # table keeps the two tables' draws independent.
        self.token_embedding = token_embedding(
            vocabulary_size,
            embedding_dim,
            tie_weights=tie_weights,
            initializer=self._initializer(),
            dtype=self.dtype_policy,
        )
        self.position_embedding = PositionEmbedding(
            sequence_length=sequence_length,
            initializer=self._initializer(),
            dtype=self.dtype_policy,
            name="position_embedding",
        )

    def _initializer(self):
        return self.embeddings_initializer.__class__.from_config(
            self.embeddings_initializer.get_config()
        )

    def build(self, input_shape):
        self.token_embedding.build(input_shape)
        self.position_embedding.build((*input_shape, self.embedding_dim))

    def call(self, inputs, start_index=0, positions=None):
        tokens = self.token_embedding(inputs)
        return tokens + self.position_embedding(
            tokens, start_index=start_index, positions=positions
        )

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.embedding_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "sequence_length": self.sequence_length,
                "embedding_dim": self.embedding_dim,
                "tie_weights": self.tie_weights,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
            }
        )
        return config
