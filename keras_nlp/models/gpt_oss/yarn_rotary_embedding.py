"""RoPE with YaRN's context extension (Peng et al., 2023), as GPT-OSS uses."""

import math

import keras
from keras import ops

from keras_nlp.layers.rotary_embedding import RotaryEmbedding


@keras.saving.register_keras_serializable(package="keras_nlp.models")
class YarnRotaryEmbedding(RotaryEmbedding):
    """`RotaryEmbedding` whose slow frequencies are interpolated (YaRN).

    Pair `k` of `d` features turns at `theta_k = max_wavelength ** (-2k/d)`.
    Pairs that turn fewer than `beta_slow` times over
    `original_max_position_embeddings` positions are slowed down by
    `factor` (interpolated); pairs that turn more than `beta_fast` times
    keep their speed (extrapolated); the ones in between blend linearly in
    `k`. Cosine and sine are multiplied by `0.1 * ln(factor) + 1`, which
    sharpens the attention logits by its square. Positions are not divided
    by anything: with `factor=1` this is plain RoPE.

    Args:
        max_wavelength: int or float. RoPE base. Defaults to `10000`.
        factor: float, at least 1. How many times longer a context than
            `original_max_position_embeddings` the frequencies stretch to.
            Defaults to `1.0`.
        original_max_position_embeddings: int. The context length the
            model was pretrained with. Defaults to `4096`.
        beta_fast: float. Turns above which a pair keeps its speed.
            Defaults to `32`.
        beta_slow: float. Turns below which a pair is fully interpolated.
            Defaults to `1`.
        truncate: bool. Round the blended band outward to whole pairs, as
            the YaRN paper does; GPT-OSS does not. Defaults to `True`.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Example:

    >>> rope = YarnRotaryEmbedding(
    ...     max_wavelength=150000, factor=32.0, truncate=False
    ... )
    >>> tuple(rope(np.ones((1, 4, 2, 64))).shape)
    (1, 4, 2, 64)
    """

    def __init__(
        self,
        max_wavelength=10000,
        factor=1.0,
        original_max_position_embeddings=4096,
        beta_fast=32.0,
        beta_slow=1.0,
        truncate=True,
        **kwargs,
    ):
        # YaRN rescales frequencies, never positions: the base class's
        # linear `scaling_factor` stays 1.
        super().__init__(max_wavelength=max_wavelength, **kwargs)
        if not (isinstance(factor, (int, float)) and factor >= 1):
            raise ValueError(
                "YaRN's `factor` stretches the context, so it must be a "
                f"number of at least 1. Received: factor={factor!r}."
            )
        if not 0 < beta_slow < beta_fast:
            raise ValueError(
                "`beta_slow` and `beta_fast` must satisfy "
                f"0 < beta_slow < beta_fast. Received: beta_slow={beta_slow}, "
                f"beta_fast={beta_fast}."
            )
        self.factor = factor
        self.original_max_position_embeddings = original_max_position_embeddings
        self.beta_fast = beta_fast
        self.beta_slow = beta_slow
        self.truncate = truncate

    def _pair_of_turns(self, turns, features):
        """The (fractional) pair index that turns `turns` times over the
        original context."""
        wavelength = self.original_max_position_embeddings / turns
        return (
            features
            * math.log(wavelength / (2 * math.pi))
            / (2 * math.log(self.max_wavelength))
        )

    def _inverse_frequency(self, features):
        inverse_frequency = super()._inverse_frequency(features)
        if self.factor == 1:
            return inverse_frequency
        low = self._pair_of_turns(self.beta_fast, features)
        high = self._pair_of_turns(self.beta_slow, features)
        if self.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, features - 1)
        pairs = ops.arange(features // 2, dtype="float32")
        # 0 for the fast pairs (kept), 1 for the slow ones (interpolated).
        interpolated = ops.clip((pairs - low) / max(high - low, 1e-3), 0, 1)
        return inverse_frequency * (
            1 - interpolated + interpolated / self.factor
        )

    def _amplitude(self, seq_len):
        del seq_len
        return 0.1 * math.log(self.factor) + 1.0

    def get_config(self):
        config = super().get_config()
        del config["scaling_factor"]
        config.update(
            {
                "factor": self.factor,
                "original_max_position_embeddings": (
                    self.original_max_position_embeddings
                ),
                "beta_fast": self.beta_fast,
                "beta_slow": self.beta_slow,
                "truncate": self.truncate,
            }
        )
        return config
