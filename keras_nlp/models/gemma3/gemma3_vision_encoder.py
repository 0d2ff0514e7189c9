"""Gemma 3's vision encoder: a SigLIP ViT, pooled and projected to text."""

import keras
from keras import ops

from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.vit_encoder import VisionTransformerEncoder
from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)

# The projection of pooled patches into the text's residual stream.
PROJECTION_DIMS = ("vision_hidden", "hidden")


class VisionOutput(keras.layers.Layer):
    """A zero-centered RMS norm, then a bias-free projection to the text.

    Sublayers `vision_soft_embedding_norm` and `vision_input_projection`
    (kernel `(vision hidden, output_dim)`), the checkpoints' names.

    Args:
        output_dim: int. The text model's hidden width.
        layer_norm_epsilon: float. Epsilon of the norm.
        **kwargs: Forwarded to `keras.layers.Layer` (`name`, `dtype`).
    """

    def __init__(self, output_dim, layer_norm_epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.output_dim = output_dim
        self.layer_norm_epsilon = layer_norm_epsilon

    def build(self, input_shape):
        self.norm = ZeroCenteredRMSNormalization(
            epsilon=self.layer_norm_epsilon,
            dtype=self.dtype_policy,
            name="vision_soft_embedding_norm",
        )
        self.norm.build(input_shape)
        self.projection = named_dense(
            self.output_dim,
            PROJECTION_DIMS,
            use_bias=False,
            kernel_initializer=keras.initializers.RandomNormal(stddev=0.01),
            dtype=self.dtype_policy,
            name="vision_input_projection",
        )
        self.projection.build(input_shape)

    def call(self, inputs):
        return self.projection(self.norm(inputs))

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.output_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "output_dim": self.output_dim,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config


# Not `package="keras_nlp"`: keras-hub registers its classes under both
# `keras_hub>Name` and `keras_nlp>Name`, so once it is imported that name
# would rebuild keras-hub's encoder (copies, pickles, `.keras` files).
@keras.saving.register_keras_serializable(package="keras_nlp.models")
class Gemma3VisionEncoder(keras.Model):
    """Images to soft tokens for `Gemma3Backbone`.

    Each image of `images` `(batch, num_images, image_size, image_size, 3)`
    goes through a pre-norm ViT (`image_encoder`, see
    `keras_nlp.layers.VisionTransformerEncoder`), its patch grid is
    average-pooled by `pool_size` in both directions, and the pooled
    patches are normalized and projected to `output_dim`
    (`vision_output_encoder`). The output is `(batch * num_images,
    num_vision_tokens_per_image, output_dim)`.

    Args:
        image_size: int. Height and width of the (square) images.
        patch_size: int. Height and width of each patch.
        num_heads: int. Attention heads of the vision blocks.
        hidden_dim: int. Width of the vision tower.
        num_layers: int. Number of vision blocks.
        intermediate_dim: int. MLP width of the vision blocks.
        output_dim: int. The text model's hidden width.
        pool_size: int. Side of the average-pooling window over patches.
            Defaults to `14`.
        layer_norm_epsilon: float. Epsilon of the output norm. Defaults to
            `1e-6`.
        dtype: string or `keras.DTypePolicy`.
        **kwargs: Forwarded to `keras.Model` (`name`, ...).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.gemma3 import Gemma3VisionEncoder

    encoder = Gemma3VisionEncoder(
        image_size=16,
        patch_size=4,
        num_heads=2,
        hidden_dim=16,
        num_layers=1,
        intermediate_dim=32,
        output_dim=32,
        pool_size=2,
    )
    tokens = encoder(np.ones((2, 1, 16, 16, 3), "float32"))  # (2, 4, 32)
    ```
    """

    def __init__(
        self,
        image_size,
        patch_size,
        num_heads,
        hidden_dim,
        num_layers,
        intermediate_dim,
        output_dim,
        pool_size=14,
        layer_norm_epsilon=1e-6,
        dtype=None,
        **kwargs,
    ):
        width = image_size // patch_size
        pooled_width = width // pool_size
        images = keras.Input(
            shape=(None, image_size, image_size, 3), name="images"
        )
        # Built by calls outside this model's scope: the variable paths
        # start with `image_encoder/`, as in the checkpoints.
        encoder = VisionTransformerEncoder(
            image_size=image_size,
            patch_size=patch_size,
            hidden_dim=hidden_dim,
            num_layers=num_layers,
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            dtype=dtype,
            name="image_encoder",
        )
        pooling = keras.layers.AveragePooling2D(
            pool_size, strides=pool_size, dtype=dtype, name="pooling"
        )
        output = VisionOutput(
            output_dim,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=dtype,
            name="vision_output_encoder",
        )
        x = encoder(ops.reshape(images, (-1, image_size, image_size, 3)))
        x = pooling(ops.reshape(x, (-1, width, width, hidden_dim)))
        x = ops.reshape(x, (-1, pooled_width * pooled_width, hidden_dim))
        super().__init__(inputs=images, outputs=output(x), **kwargs)
        self.image_size = image_size
        self.patch_size = patch_size
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.intermediate_dim = intermediate_dim
        self.output_dim = output_dim
        self.pool_size = pool_size
        self.layer_norm_epsilon = layer_norm_epsilon
        self.num_vision_tokens_per_image = pooled_width * pooled_width
        if dtype is not None:
            self.dtype_policy = keras.dtype_policies.get(dtype)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "image_size": self.image_size,
            "patch_size": self.patch_size,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "num_layers": self.num_layers,
            "intermediate_dim": self.intermediate_dim,
            "output_dim": self.output_dim,
            "pool_size": self.pool_size,
            "layer_norm_epsilon": self.layer_norm_epsilon,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)
