"""Rotary position embedding (RoPE), rotate-half convention."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_nlp.layers")
class RotaryEmbedding(keras.layers.Layer):
    """Rotates feature pairs by an angle proportional to the token position.

    The feature axis (last axis) of size `d` is split into two halves
    `(x1, x2)`. Feature `k` of the first half and feature `k` of the second
    half form a pair rotated by the angle `position * theta_k`, where
    `theta_k = max_wavelength ** (-2k / d) / scaling_factor`:

        out1 = x1 * cos - x2 * sin
        out2 = x2 * cos + x1 * sin

    This is the "rotate half" layout used by Gemma, Llama, Mistral and most
    Hugging Face checkpoints. The sequence axis is axis 1; any axes between
    the sequence and feature axes (e.g. attention heads) are broadcast over.
    Angles are computed in float32 and their cosine and sine are cast to the
    compute dtype before being applied.

    Args:
        max_wavelength: int. Base of the geometric progression of
            wavelengths. Defaults to `10000`.
        scaling_factor: float. Positions are divided by this factor (linear
            position interpolation). Defaults to `1.0`.
        **kwargs: Forwarded to `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: Tensor of shape `(batch, seq, ..., features)`, typically
            `(batch, seq, heads, head_dim)`. `features` must be even.
        start_index: int or scalar tensor. Position of the first token; the
            token at sequence index `t` gets position `start_index + t`.
            Ignored when `positions` is given.
        positions: Optional tensor of shape `(seq,)` or `(batch, seq)` with
            explicit (possibly non-contiguous) token positions.

    Example:

    >>> rope = RotaryEmbedding()
    >>> rope(np.ones((2, 5, 4, 8))).shape
    (2, 5, 4, 8)
    """

    def __init__(self, max_wavelength=10000, scaling_factor=1.0, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = max_wavelength
        self.scaling_factor = scaling_factor
        # No weights. Attention layers call it only eagerly (their symbolic
        # calls use `compute_output_shape`), so Keras would never mark it
        # built, and `Model.quantize` refuses a model with an unbuilt layer.
        self.built = True

    def _angles(self, seq_len, features, start_index, positions):
        """Returns float32 angles of shape `(batch or 1, seq, features/2)`."""
        if positions is None:
            positions = ops.arange(seq_len, dtype="float32")
            positions = positions + ops.cast(start_index, "float32")
        positions = ops.cast(positions, "float32")
        if len(positions.shape) == 1:
            positions = ops.expand_dims(positions, 0)
        inverse_frequency = self._context_inverse_frequency(
            self._inverse_frequency(features), positions
        )
        positions = positions / ops.cast(self.scaling_factor, "float32")
        return positions[:, :, None] * inverse_frequency[None, None, :]

    def _inverse_frequency(self, features):
        """Float32 `(features / 2,)` rotation speeds; subclasses rescale them.

        Model-specific RoPE variants (Llama 3's frequency-dependent scaling)
        override only this method; ones that also depend on the positions
        of the call (Phi-3) use `_context_inverse_frequency`.
        """
        exponents = ops.arange(0, features, 2, dtype="float32") / features
        return ops.power(ops.cast(self.max_wavelength, "float32"), -exponents)

    def _context_inverse_frequency(self, inverse_frequency, positions):
        """Adapts `_inverse_frequency` to the positions of this call.

        Identity by default. Variants whose frequencies depend on how far
        the context reaches (Phi-3's LongRoPE picks its short or long
        factors by the last position) override this with `keras.ops`, as
        `positions` (float32, `(batch or 1, seq)`) is dynamic when traced.
        """
        del positions
        return inverse_frequency

    def _amplitude(self, seq_len):
        """Factor on cos and sin; 1 except for variants that rescale them."""
        del seq_len
        return 1.0

    def call(self, inputs, start_index=0, positions=None):
        features = inputs.shape[-1]
        if features is None or features % 2:
            raise ValueError(
                "RotaryEmbedding needs an even, static feature (last) axis; "
                f"got inputs with shape {inputs.shape}."
            )
        angles = self._angles(
            ops.shape(inputs)[1], features, start_index, positions
        )
        # Both halves of the feature axis share the same angle per pair.
        angles = ops.concatenate([angles, angles], axis=-1)
        # Broadcast over every axis between the sequence and feature axes.
        for _ in range(len(inputs.shape) - 3):
            angles = ops.expand_dims(angles, axis=2)
        amplitude = self._amplitude(ops.shape(inputs)[1])
        cos = ops.cast(ops.cos(angles) * amplitude, self.compute_dtype)
        sin = ops.cast(ops.sin(angles) * amplitude, self.compute_dtype)
        first, second = ops.split(inputs, 2, axis=-1)
        rotated_half = ops.concatenate([-second, first], axis=-1)
        return inputs * cos + rotated_half * sin

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_wavelength": self.max_wavelength,
                "scaling_factor": self.scaling_factor,
            }
        )
        return config


def rotate_leading(rotary_embedding, x, rotary_dim, **at):
    """`rotary_embedding` on the first `rotary_dim` features of each head
    of `x`, the rest passed through (partial RoPE: GPT-NeoX, Qwen 3.5).

    Args:
        rotary_embedding: a `RotaryEmbedding`.
        x: `(batch, seq, heads, head_dim)`.
        rotary_dim: int, even, at most `head_dim`; `0` rotates nothing.
        **at: `start_index` and `positions`, as the embedding takes them.
    """
    if rotary_dim == 0:
        return x
    if rotary_dim == x.shape[-1]:
        return rotary_embedding(x, **at)
    rotated = rotary_embedding(x[..., :rotary_dim], **at)
    return ops.concatenate([rotated, x[..., rotary_dim:]], axis=-1)
