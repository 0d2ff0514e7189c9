"""OPT-350M's embeddings: narrow token embeddings projected to hidden."""

import keras

from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.token_and_position_embedding import (
    TokenAndPositionEmbedding,
)

# `project_in` maps `(embedding, hidden)`; `project_out` the other way.
PROJECT_IN_DIMS = ("embedding", "hidden")
PROJECT_OUT_DIMS = ("hidden", "embedding")


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class OPTProjectedEmbedding(TokenAndPositionEmbedding):
    """Token embeddings, projected to `hidden_dim`, plus position embeddings.

    The token table is `embedding_dim` wide; a bias-free dense `project_in`
    maps each token embedding to `hidden_dim`, and the `hidden_dim`-wide
    learned position embedding is added to that, as in OPT-350M. The
    variable paths read `<name>/token_embedding/embeddings`,
    `<name>/project_in/kernel` and `<name>/position_embedding/embeddings`.

    Args:
        vocabulary_size: int. Rows of the token table.
        sequence_length: int. Rows of the position table.
        embedding_dim: int. Width of the token table.
        hidden_dim: int. Width of the position table and of the outputs.
        embeddings_initializer: initializer of both tables and of the
            projection kernel. Defaults to `"uniform"`.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: int `(batch, seq)` token ids.
        start_index: int or scalar tensor, position of the first token.
        positions: optional int `(batch, seq)` positions (see
            `PositionEmbedding`); overrides `start_index`.

    Returns:
        `(batch, seq, hidden_dim)`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.opt.opt_embedding import OPTProjectedEmbedding

    embeddings = OPTProjectedEmbedding(
        vocabulary_size=100, sequence_length=16, embedding_dim=8, hidden_dim=12
    )
    embeddings(np.array([[3, 1, 4, 1, 5]], "int32")).shape  # (1, 5, 12)
    ```
    """

    def __init__(
        self,
        vocabulary_size,
        sequence_length,
        embedding_dim,
        hidden_dim,
        embeddings_initializer="uniform",
        **kwargs,
    ):
        super().__init__(
            vocabulary_size=vocabulary_size,
            sequence_length=sequence_length,
            embedding_dim=embedding_dim,
            embeddings_initializer=embeddings_initializer,
            **kwargs,
        )
        self.hidden_dim = hidden_dim
        self.project_in = named_dense(
            hidden_dim,
            PROJECT_IN_DIMS,
            name="project_in",
            use_bias=False,
            kernel_initializer=self.embeddings_initializer,
            dtype=self.dtype_policy,
        )

    def build(self, input_shape):
        self.token_embedding.build(input_shape)
        self.project_in.build((*input_shape, self.embedding_dim))
        self.position_embedding.build((*input_shape, self.hidden_dim))

    def call(self, inputs, start_index=0, positions=None):
        tokens = self.project_in(self.token_embedding(inputs))
        return tokens + self.position_embedding(
            tokens, start_index=start_index, positions=positions
        )

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.hidden_dim)

    def get_config(self):
        config = super().get_config()
        config.pop("tie_weights")
        config["hidden_dim"] = self.hidden_dim
        return config
