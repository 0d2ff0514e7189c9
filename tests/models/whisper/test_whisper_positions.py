"""Whisper's encoder positions: fixed sinusoids, never trained.

The oracle table gives every weight random values, this table too, so its
own values are checked here against Whisper's formula.
"""

import keras
import numpy as np

from tests.models.tiny_configs import tiny


def test_encoder_positions_are_fixed_sinusoids():
    """`[sin, cos]` of position / 10000 ** (i / (C/2 - 1)): the first row
    is zeros then ones."""
    backbone_cls, config = tiny("WhisperBackbone")
    table = backbone_cls(**config).encoder_position_embedding.embeddings
    assert not table.trainable
    values = keras.ops.convert_to_numpy(table)
    length, half = values.shape[0], values.shape[1] // 2
    timescales = 10000.0 ** (np.arange(half) / (half - 1))
    angles = np.arange(length)[:, None] / timescales
    expected = np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
    np.testing.assert_allclose(values, expected, atol=1e-6)
