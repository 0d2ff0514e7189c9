"""RoPE with Llama 3.1's frequency-dependent context extension."""

import math

import keras
from keras import ops

from keras_nlp.layers.rotary_embedding import RotaryEmbedding


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class LlamaRotaryEmbedding(RotaryEmbedding):
    """`RotaryEmbedding` whose slow frequencies are stretched (Llama 3.1+).

    Frequencies whose wavelength exceeds
    `pretraining_sequence_length / low_freq_factor` are divided by
    `frequency_adjustment_factor`; those with a wavelength below
    `pretraining_sequence_length / high_freq_factor` are kept; the ones in
    between are interpolated linearly in `pretraining_sequence_length /
    wavelength`. With the four factors left `None` this is plain RoPE.

    Args:
        frequency_adjustment_factor: float or `None`. Divisor of the slow
            frequencies.
        low_freq_factor: float or `None`.
        high_freq_factor: float or `None`.
        pretraining_sequence_length: int or `None`. Context length the
            model was pretrained with.
        **kwargs: `RotaryEmbedding` arguments (`max_wavelength`,
            `scaling_factor`, `name`, `dtype`).

    Example:

    >>> rope = LlamaRotaryEmbedding(
    ...     max_wavelength=500000,
    ...     frequency_adjustment_factor=32.0,
    ...     low_freq_factor=1.0,
    ...     high_freq_factor=4.0,
    ...     pretraining_sequence_length=8192,
    ... )
    >>> rope(np.ones((1, 4, 2, 64))).shape
    (1, 4, 2, 64)
    """

    def __init__(
        self,
        frequency_adjustment_factor=None,
        low_freq_factor=None,
        high_freq_factor=None,
        pretraining_sequence_length=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        factors = {
            "frequency_adjustment_factor": frequency_adjustment_factor,
            "low_freq_factor": low_freq_factor,
            "high_freq_factor": high_freq_factor,
            "pretraining_sequence_length": pretraining_sequence_length,
        }
        given = [name for name, value in factors.items() if value is not None]
        if given and len(given) != len(factors):
            missing = sorted(set(factors) - set(given))
            raise ValueError(
                "Llama 3.1 RoPE scaling needs all of "
                f"{sorted(factors)} or none of them; missing {missing}."
            )
        self.frequency_adjustment_factor = frequency_adjustment_factor
        self.low_freq_factor = low_freq_factor
        self.high_freq_factor = high_freq_factor
        self.pretraining_sequence_length = pretraining_sequence_length

    def _inverse_frequency(self, features):
        inverse_frequency = super()._inverse_frequency(features)
        if self.frequency_adjustment_factor is None:
            return inverse_frequency
        length = float(self.pretraining_sequence_length)
        wavelength = 2 * math.pi / inverse_frequency
        stretched = inverse_frequency / self.frequency_adjustment_factor
        # 0 at the slow edge, 1 at the fast edge of the interpolated band.
        smooth = (length / wavelength - self.low_freq_factor) / (
            self.high_freq_factor - self.low_freq_factor
        )
        blended = (1 - smooth) * stretched + smooth * inverse_frequency
        slow = wavelength > length / self.low_freq_factor
        fast = wavelength < length / self.high_freq_factor
        return ops.where(
            slow, stretched, ops.where(fast, inverse_frequency, blended)
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "frequency_adjustment_factor": (
                    self.frequency_adjustment_factor
                ),
                "low_freq_factor": self.low_freq_factor,
                "high_freq_factor": self.high_freq_factor,
                "pretraining_sequence_length": (
                    self.pretraining_sequence_length
                ),
            }
        )
        return config
