"""RoPE with Phi-3's "su" (LongRoPE) per-frequency context extension."""

import math

import keras
from keras import ops

from keras_nlp.layers.rotary_embedding import RotaryEmbedding


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class Phi3SuScaledRotaryEmbedding(RotaryEmbedding):
    """`RotaryEmbedding` with Phi-3's per-frequency "su" (LongRoPE) factors.

    Each rotation speed `k` is divided by `short_factor[k]` while the
    context (the last position of the call, plus one) fits in
    `pretraining_sequence_length`, and by `long_factor[k]` once it is
    longer. The choice is made with `keras.ops` on the call's positions, so
    it also holds in a traced graph and during cached decoding. When
    `max_sequence_length` exceeds `pretraining_sequence_length` by a factor
    `s`, cosine and sine are multiplied by
    `sqrt(1 + log(s) / log(pretraining_sequence_length))` at every length.

    Args:
        short_factor: list of `head_dim // 2` floats.
        long_factor: list of `head_dim // 2` floats.
        max_sequence_length: int. Longest context the model is used with.
            Defaults to `4096`.
        pretraining_sequence_length: int. Context length the model was
            pretrained with. Defaults to `4096`.
        **kwargs: `RotaryEmbedding` arguments (`max_wavelength`, `name`,
            `dtype`).

    Example:

    >>> rope = Phi3SuScaledRotaryEmbedding(
    ...     short_factor=[1.0, 1.5],
    ...     long_factor=[2.0, 4.0],
    ...     max_sequence_length=64,
    ...     pretraining_sequence_length=8,
    ... )
    >>> tuple(rope(np.ones((1, 4, 2, 4))).shape)
    (1, 4, 2, 4)
    """

    def __init__(
        self,
        short_factor,
        long_factor,
        max_sequence_length=4096,
        pretraining_sequence_length=4096,
        **kwargs,
    ):
        super().__init__(**kwargs)
        short_factor = [float(f) for f in short_factor]
        long_factor = [float(f) for f in long_factor]
        if len(short_factor) != len(long_factor):
            raise ValueError(
                "`short_factor` and `long_factor` need one entry per "
                f"rotated pair each. Received {len(short_factor)} and "
                f"{len(long_factor)} entries."
            )
        self.short_factor = short_factor
        self.long_factor = long_factor
        self.max_sequence_length = max_sequence_length
        self.pretraining_sequence_length = pretraining_sequence_length

    def _context_inverse_frequency(self, inverse_frequency, positions):
        pairs = inverse_frequency.shape[0]
        if pairs != len(self.short_factor):
            raise ValueError(
                f"Phi-3 su RoPE has {len(self.short_factor)} factors per "
                f"list but the heads rotate {pairs} pairs (head_dim "
                f"{2 * pairs}); the lists need head_dim // 2 entries."
            )
        # Decoding one token at a time still sees the whole context this
        # way: its single position is the cache index.
        context_length = ops.max(positions) + 1.0
        factor = ops.where(
            context_length > float(self.pretraining_sequence_length),
            ops.convert_to_tensor(self.long_factor, "float32"),
            ops.convert_to_tensor(self.short_factor, "float32"),
        )
        return inverse_frequency / factor

    def _amplitude(self, seq_len):
        # Depends on the configured lengths only, not on this call's.
        del seq_len
        ratio = self.max_sequence_length / self.pretraining_sequence_length
        if ratio <= 1.0:
            return 1.0
        return math.sqrt(
            1 + math.log(ratio) / math.log(self.pretraining_sequence_length)
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "short_factor": self.short_factor,
                "long_factor": self.long_factor,
                "max_sequence_length": self.max_sequence_length,
                "pretraining_sequence_length": (
                    self.pretraining_sequence_length
                ),
            }
        )
        return config
