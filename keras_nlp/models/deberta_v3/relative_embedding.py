"""DeBERTa's table of relative-position embeddings."""

import keras

from keras_nlp.distribution.dims import declare_dims

# `(2 * bucket_size, hidden)`: one row per relative-position bucket.
RELATIVE_EMBEDDING_DIMS = ("position", "hidden")


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class RelativeEmbedding(keras.layers.Layer):
    """A trained row per relative-position bucket, LayerNorm-ed.

    The variable `rel_embedding` is `(2 * bucket_size, hidden_dim)`; a call
    returns it through `rel_embeddings_layer_norm`, the same for any input
    (the input only places the layer in a functional graph). Every
    `DisentangledSelfAttention` block of a backbone reads this one table.

    Args:
        hidden_dim: int. Width of each row.
        bucket_size: int. Half the number of rows.
        layer_norm_epsilon: float. Epsilon of the LayerNorm. Defaults to
            `1e-7`.
        initializer: initializer of the table.
        **kwargs: forwarded to `keras.layers.Layer` (`name`, `dtype`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.deberta_v3.relative_embedding import (
        RelativeEmbedding,
    )

    table = RelativeEmbedding(hidden_dim=8, bucket_size=4)
    table(np.zeros((2, 5, 8), "float32")).shape  # (8, 8)
    ```
    """

    def __init__(
        self,
        hidden_dim,
        bucket_size,
        layer_norm_epsilon=1e-7,
        initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.bucket_size = bucket_size
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer = keras.initializers.get(initializer)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon,
            dtype=self.dtype_policy,
            name="rel_embeddings_layer_norm",
        )
        declare_dims(self, rel_embedding=RELATIVE_EMBEDDING_DIMS)

    def build(self, input_shape=None):
        shape = (2 * self.bucket_size, self.hidden_dim)
        self.rel_embedding = self.add_weight(
            shape=shape, initializer=self.initializer, name="rel_embedding"
        )
        self.layer_norm.build(shape)

    def call(self, inputs=None):
        return self.layer_norm(self.rel_embedding)

    def compute_output_shape(self, input_shape=None):
        return (2 * self.bucket_size, self.hidden_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_dim": self.hidden_dim,
                "bucket_size": self.bucket_size,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
