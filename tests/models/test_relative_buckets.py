"""T5's and DeBERTaV3's relative position buckets equal keras-hub's.

Every (query, key) pair must read the table row keras-hub's reads, at the
presets' sizes too: past T5's `max_distance` (128), and DeBERTaV3's
(256 buckets, 512 positions) on 700 tokens. A bucket depends only on the
offset `key - query`, so keras-hub's are stored one per offset by
`python -m tests.oracles relative_buckets`.
"""

import keras
import numpy as np
import pytest

from keras_nlp.models.deberta_v3.disentangled_self_attention import (
    relative_position_index,
)
from keras_nlp.models.t5.t5_layers import relative_position_buckets
from tests import oracles

DATA = "relative_buckets"
# name -> (length, T5's `bidirectional` or DeBERTaV3's (bucket_size,
# max_sequence_length)): the presets', and the backbone table's rows'.
CASES = {
    "t5-bidirectional": (300, True),
    "t5-causal": (300, False),
    "deberta_v3-256_512": (700, (256, 512)),
    "deberta_v3-4_16": (40, (4, 16)),
    "deberta_v3-8_64": (40, (8, 64)),
}


def _ours(name):
    length, option = CASES[name]
    if name.startswith("t5"):
        buckets = relative_position_buckets(length, length, option)
    else:
        buckets = relative_position_index(length, *option)
    return keras.ops.convert_to_numpy(buckets)


def _keras_hubs(name):
    length, option = CASES[name]
    if name.startswith("t5"):
        from keras_hub.src.models.t5.t5_multi_head_attention import (
            T5MultiHeadAttention,
        )

        positions = keras.ops.arange(length)
        offsets = positions[None, :] - positions[:, None]
        return T5MultiHeadAttention._relative_position_bucket(
            offsets, bidirectional=option
        )
    from keras_hub.src.models.deberta_v3.disentangled_self_attention import (
        DisentangledSelfAttention,
    )

    bucket_size, max_sequence_length = option
    attention = DisentangledSelfAttention(
        num_heads=1,
        hidden_dim=4,
        max_position_embeddings=max_sequence_length,
        bucket_size=bucket_size,
    )
    offsets = keras.ops.convert_to_numpy(attention._get_rel_pos(length))
    return np.clip(offsets[0, 0] + bucket_size, 0, 2 * bucket_size - 1)


def by_offset(per_offset):
    """`(length, length)` buckets from one per offset `-(length - 1)` to
    `length - 1`."""
    length = (len(per_offset) + 1) // 2
    positions = np.arange(length)
    return per_offset[positions[None, :] - positions[:, None] + length - 1]


def generate_oracle_data():
    arrays = {}
    for name in CASES:
        buckets = keras.ops.convert_to_numpy(_keras_hubs(name))
        per_offset = np.concatenate([buckets[::-1, 0], buckets[0, 1:]])
        np.testing.assert_array_equal(by_offset(per_offset), buckets)
        arrays[name] = per_offset.astype("int16")
    return {DATA: arrays}


@pytest.mark.parametrize("name", list(CASES))
def test_relative_buckets_equal_keras_hubs(name):
    expected = by_offset(oracles.load(DATA)[name])
    actual = _ours(name)
    np.testing.assert_array_equal(actual, expected)
    # Log buckets in use: fewer distinct rows than offsets.
    assert len(np.unique(actual)) < 2 * len(actual) - 1
