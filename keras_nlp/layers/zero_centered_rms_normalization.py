"""RMS normalization with a zero-centered (``1 + scale``) gain."""

import keras
from keras import ops


# Keras's own `keras.layers.RMSNormalization` multiplies by `scale`; Gemma
# checkpoints store the gain as an offset from one and multiply by `1 + scale`.
class ZeroCenteredRMSNormalization(keras.layers.Layer):
    """Root-mean-square normalization whose learned gain is `1 + scale`.

    The last axis is divided by its root mean square and multiplied by
    `1 + scale`, where `scale` starts at zeros, so a freshly built layer is a
    plain RMS normalization. The arithmetic always happens in float32 and the
    result is cast back to the layer's compute dtype.

    Args:
        epsilon: float. Added to the mean square before the square root, for
            numerical stability. Defaults to `1e-6`.
        **kwargs: Forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Example:

    >>> layer = ZeroCenteredRMSNormalization()
    >>> layer(np.ones((2, 3, 4))).shape
    (2, 3, 4)
    """

    def __init__(self, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def build(self, input_shape):
        self.scale = self.add_weight(
            name="scale",
            shape=(input_shape[-1],),
            initializer="zeros",
            trainable=True,
        )

    def call(self, inputs):
        x = ops.cast(inputs, "float32")
        mean_square = ops.mean(ops.square(x), axis=-1, keepdims=True)
        x = x * ops.rsqrt(mean_square + self.epsilon)
        gain = 1.0 + ops.cast(self.scale, "float32")
        return ops.cast(x * gain, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config["epsilon"] = self.epsilon
        return config
