"""Qwen3Backbone equals keras-hub's (the oracle).

As for Qwen 2 (see `tests/models/qwen/test_qwen_numerics.py`), keras-hub's
Qwen 3 attention drops the sliding window on its fused path (JAX, torch)
and applies it on its explicit one (TensorFlow). Tests whose window is
shorter than the inputs pin the explicit path.
"""

import keras
import keras_hub
import keras_hub.src.models.qwen3.qwen3_attention as keras_hub_qwen3_attention
import numpy as np
import pytest

from keras_nlp.models.qwen3.qwen3_backbone import Qwen3Backbone
from tests.models.backbone_checks import assert_matches_oracle
from tests.models.backbone_checks import random_inputs

VOCAB = 100
# name: (query heads, key/value heads, head_dim, hidden_dim)
HEADS = {
    # qwen3_0.6b's 2 query heads per key/value head, and head_dim * heads
    # (128) twice hidden_dim (64).
    "gqa_8_4": (8, 4, 16, 64),
    "gqa_6_2": (6, 2, 8, 48),
    "mqa_4_1": (4, 1, 16, 48),
    "mha_4_4": (4, 4, 8, 32),
}
OPTIONS = {
    "tied": {},
    "untied": dict(tie_word_embeddings=False),
    # The default window (32768) is wider than the inputs; `None` is off.
    "no_window": dict(sliding_window_size=None),
    "rope_scaled": dict(
        rope_max_wavelength=1000000,
        rope_scaling_factor=2.0,
        layer_norm_epsilon=1e-5,
    ),
}


@pytest.fixture
def explicit_oracle_path(monkeypatch):
    """Pins keras-hub's Qwen 3 attention to its explicit (windowed) path."""
    monkeypatch.setattr(
        keras_hub_qwen3_attention,
        "fused_attention_op_available",
        lambda: False,
    )


def make_config(heads, **options):
    num_query_heads, num_key_value_heads, head_dim, hidden_dim = HEADS[heads]
    return dict(
        vocabulary_size=VOCAB,
        num_layers=2,
        num_query_heads=num_query_heads,
        num_key_value_heads=num_key_value_heads,
        head_dim=head_dim,
        hidden_dim=hidden_dim,
        intermediate_dim=96,
        **options,
    )


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("heads", list(HEADS))
def test_outputs_equal_keras_hub(heads, option):
    config = make_config(heads, **OPTIONS[option])
    diff = assert_matches_oracle(
        Qwen3Backbone(**config),
        keras_hub.models.Qwen3Backbone(**config),
        random_inputs(VOCAB, batch=3, length=20),
    )
    print(f"qwen3 {heads} {option}: max |diff| {diff:.2e}")


def test_head_dim_none_equals_keras_hub():
    config = dict(make_config("gqa_6_2"), head_dim=None)
    diff = assert_matches_oracle(
        Qwen3Backbone(**config),
        keras_hub.models.Qwen3Backbone(**config),
        random_inputs(VOCAB, batch=3, length=20),
    )
    print(f"qwen3 gqa_6_2 head_dim=None: max |diff| {diff:.2e}")


@pytest.mark.parametrize(
    "heads, window, tied",
    [
        ("gqa_8_4", 5, True),
        ("gqa_6_2", 5, False),
        ("mqa_4_1", 1, True),
        ("mha_4_4", 5, True),
        # The default window, wider than the sequence.
        ("gqa_8_4", 32768, False),
    ],
)
@pytest.mark.usefixtures("explicit_oracle_path")
def test_sliding_window_equals_keras_hub(heads, window, tied):
    config = make_config(
        heads, sliding_window_size=window, tie_word_embeddings=tied
    )
    inputs = random_inputs(VOCAB, batch=3, length=20)
    ours = Qwen3Backbone(**config)
    diff = assert_matches_oracle(
        ours, keras_hub.models.Qwen3Backbone(**config), inputs
    )
    print(f"qwen3 {heads} window={window} tied={tied}: max |diff| {diff:.2e}")
    if window < 20:
        # The window is really exercised: without it the outputs differ.
        unwindowed = Qwen3Backbone(**dict(config, sliding_window_size=None))
        unwindowed.set_weights(ours.get_weights())
        gap = np.abs(
            keras.ops.convert_to_numpy(ours(inputs))
            - keras.ops.convert_to_numpy(unwindowed(inputs))
        ).max()
        assert gap > 1e-3
