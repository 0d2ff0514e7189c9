"""LlamaBackbone and Llama3Backbone equal keras-hub's (the oracle)."""

import keras_hub
import pytest

from keras_nlp.models.llama.llama_backbone import LlamaBackbone
from keras_nlp.models.llama3.llama3_backbone import Llama3Backbone
from tests.models.backbone_checks import assert_matches_oracle
from tests.models.backbone_checks import random_inputs

HEADS = {"mqa_8_1": (8, 1), "mha_4_4": (4, 4), "gqa_8_2": (8, 2)}
LLAMA3_1_ROPE = dict(
    rope_max_wavelength=500000,
    rope_frequency_adjustment_factor=32.0,
    rope_low_freq_factor=1.0,
    rope_high_freq_factor=4.0,
    # Small, so every band of the scaling is used by 8-dim heads.
    rope_pretraining_sequence_length=16,
)


@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize(
    "ours_cls, oracle_cls, options",
    [
        (LlamaBackbone, keras_hub.models.LlamaBackbone, {}),
        (
            Llama3Backbone,
            keras_hub.models.Llama3Backbone,
            dict(LLAMA3_1_ROPE, tie_word_embeddings=True),
        ),
        # keras-hub 0.32 ignores `rope_position_scaling_factor` in Llama's
        # RoPE; ours divides positions by it as documented, so the oracle
        # comparison keeps it at 1 (tests/layers covers the scaling).
        (
            Llama3Backbone,
            keras_hub.models.Llama3Backbone,
            dict(rope_max_wavelength=500000, layer_norm_epsilon=1e-5),
        ),
    ],
    ids=["llama", "llama3_1_tied", "llama3_untied"],
)
def test_outputs_equal_keras_hub(heads, ours_cls, oracle_cls, options):
    num_query_heads, num_key_value_heads = HEADS[heads]
    config = dict(
        vocabulary_size=100,
        num_layers=2,
        num_query_heads=num_query_heads,
        num_key_value_heads=num_key_value_heads,
        hidden_dim=64,
        intermediate_dim=96,
        **options,
    )
    diff = assert_matches_oracle(
        ours_cls(**config),
        oracle_cls(**config),
        random_inputs(100, batch=3, length=20),
    )
    assert diff < 1e-5
