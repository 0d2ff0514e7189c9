"""QwenBackbone equals keras-hub's (the oracle).

keras-hub's Qwen attention has two paths. Where Keras offers flash
attention (JAX, torch) it calls `ops.dot_product_attention` and silently
drops the sliding window; elsewhere (TensorFlow) it applies the window
explicitly. Tests without a window compare against the backend's own path;
window tests pin the explicit one, the only one that applies the window.
"""

import keras
import keras_hub
import keras_hub.src.models.qwen.qwen_attention as keras_hub_qwen_attention
import numpy as np
import pytest

from keras_nlp.models.qwen.qwen_backbone import QwenBackbone
from tests.models.backbone_checks import assert_matches_oracle
from tests.models.backbone_checks import random_inputs

VOCAB = 100
# name: (query heads, key/value heads, hidden_dim)
HEADS = {
    "gqa_6_2": (6, 2, 48),
    # qwen2.5_0.5b's 7 query heads per key/value head.
    "gqa_14_2": (14, 2, 56),
    "mqa_4_1": (4, 1, 48),
    "mha_4_4": (4, 4, 48),
}
OPTIONS = {
    "tied": {},
    "untied": dict(tie_word_embeddings=False),
    "rope_scaled": dict(
        rope_max_wavelength=1000000,
        rope_scaling_factor=2.0,
        layer_norm_epsilon=1e-5,
    ),
}


@pytest.fixture
def explicit_oracle_path(monkeypatch):
    """Pins keras-hub's Qwen attention to its explicit (windowed) path."""
    monkeypatch.setattr(
        keras_hub_qwen_attention, "fused_attention_op_available", lambda: False
    )


def make_config(heads, **options):
    num_query_heads, num_key_value_heads, hidden_dim = HEADS[heads]
    return dict(
        vocabulary_size=VOCAB,
        num_layers=2,
        num_query_heads=num_query_heads,
        num_key_value_heads=num_key_value_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=96,
        **options,
    )


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("heads", list(HEADS))
def test_outputs_equal_keras_hub(heads, option):
    config = make_config(heads, **OPTIONS[option])
    diff = assert_matches_oracle(
        QwenBackbone(**config),
        keras_hub.models.QwenBackbone(**config),
        random_inputs(VOCAB, batch=3, length=20),
    )
    print(f"qwen {heads} {option}: max |diff| {diff:.2e}")


@pytest.mark.parametrize(
    "heads, window, tied",
    [
        ("gqa_6_2", 5, True),
        ("gqa_14_2", 5, False),
        ("mqa_4_1", 5, True),
        ("mha_4_4", 1, True),
        ("gqa_6_2", 1, False),
        # Wider than the sequence: no effect.
        ("gqa_14_2", 32768, True),
    ],
)
@pytest.mark.usefixtures("explicit_oracle_path")
def test_sliding_window_equals_keras_hub(heads, window, tied):
    config = make_config(
        heads,
        use_sliding_window_attention=True,
        sliding_window_size=window,
        tie_word_embeddings=tied,
    )
    inputs = random_inputs(VOCAB, batch=3, length=20)
    ours = QwenBackbone(**config)
    diff = assert_matches_oracle(
        ours, keras_hub.models.QwenBackbone(**config), inputs
    )
    print(f"qwen {heads} window={window} tied={tied}: max |diff| {diff:.2e}")
    if window < 20:
        # The window is really exercised: without it the outputs differ.
        unwindowed = QwenBackbone(
            **dict(config, use_sliding_window_attention=False)
        )
        unwindowed.set_weights(ours.get_weights())
        gap = np.abs(
            keras.ops.convert_to_numpy(ours(inputs))
            - keras.ops.convert_to_numpy(unwindowed(inputs))
        ).max()
        assert gap > 1e-3


@pytest.mark.usefixtures("explicit_oracle_path")
def test_explicit_path_without_window_equals_keras_hub():
    config = make_config("gqa_14_2", tie_word_embeddings=False)
    diff = assert_matches_oracle(
        QwenBackbone(**config),
        keras_hub.models.QwenBackbone(**config),
        random_inputs(VOCAB, batch=3, length=20),
    )
    print(f"qwen gqa_14_2 explicit path: max |diff| {diff:.2e}")
