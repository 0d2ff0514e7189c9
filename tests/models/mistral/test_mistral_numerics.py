"""MistralBackbone equals keras-hub's (the oracle) on tiny configs."""

import keras
import keras_hub
import numpy as np
import pytest

from keras_nlp.models.mistral.mistral_backbone import MistralBackbone
from tests.models.backbone_checks import assert_matches_oracle
from tests.models.backbone_checks import random_inputs

VOCAB = 97
LENGTH = 12
BASE = dict(
    vocabulary_size=VOCAB,
    num_layers=2,
    hidden_dim=32,
    intermediate_dim=48,
)
# name -> (query heads, key/value heads, options). Inputs have 12 tokens
# (3 of them left padding in the first row), so windows 1, 3 and 5 cut
# every later token's view; 12 and None do not.
CASES = {
    "gqa_4_2_window_5": (4, 2, dict(sliding_window=5)),
    "mqa_4_1_window_3": (4, 1, dict(sliding_window=3)),
    "mha_4_4_window_1": (4, 4, dict(sliding_window=1)),
    "gqa_8_2_window_12": (8, 2, dict(sliding_window=LENGTH)),
    "gqa_4_2_no_window": (4, 2, dict(sliding_window=None)),
    "gqa_4_2_head_dim_16": (4, 2, dict(sliding_window=4, head_dim=16)),
    # keras-hub 0.32 applies `rope_scaling_factor` in Mistral's RoPE.
    "gqa_4_2_rope_options": (
        4,
        2,
        dict(
            sliding_window=6,
            rope_max_wavelength=100,
            rope_scaling_factor=4.0,
            layer_norm_epsilon=1e-3,
            dropout=0.1,
        ),
    ),
}


def make_config(name):
    num_query_heads, num_key_value_heads, options = CASES[name]
    return dict(
        BASE,
        num_query_heads=num_query_heads,
        num_key_value_heads=num_key_value_heads,
        **options,
    )


def sharpen(model, seed=0):
    """Unit-scale projections, so attention is far from uniform.

    With the default 0.02 initializer the attention logits are so small
    that a wrong window or rotation changes the outputs by less than the
    tolerance.
    """
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if len(variable.shape) >= 2:
            if variable.path.endswith("embeddings"):
                fan_in = 1
            elif "attention_output" in variable.path:
                fan_in = variable.shape[0] * variable.shape[1]
            else:
                fan_in = variable.shape[0]
            value = rng.normal(0.0, fan_in**-0.5, variable.shape)
            variable.assign(value.astype("float32"))


def make_pair(ours_config, oracle_config=None, seed=0):
    keras.utils.set_random_seed(seed)
    oracle = keras_hub.models.MistralBackbone(**(oracle_config or ours_config))
    sharpen(oracle, seed)
    return MistralBackbone(**ours_config), oracle


@pytest.mark.parametrize("name", list(CASES))
def test_outputs_equal_keras_hub(name):
    ours, oracle = make_pair(make_config(name))
    diff = assert_matches_oracle(ours, oracle, random_inputs(VOCAB))
    print(f"{name}: max |ours - keras_hub| = {diff:.2e}")
    assert diff < 1e-5


@pytest.mark.parametrize(
    "ours_override, oracle_override",
    [
        ({"sliding_window": 4}, {"sliding_window": 5}),
        ({"sliding_window": None}, {"sliding_window": 6}),
        ({"rope_scaling_factor": 1.0}, {"rope_scaling_factor": 2.0}),
    ],
)
def test_the_comparison_detects_a_wrong_window_or_rope(
    ours_override, oracle_override
):
    config = make_config("gqa_4_2_window_5")
    ours, oracle = make_pair(
        {**config, **ours_override}, {**config, **oracle_override}
    )
    with pytest.raises(AssertionError):
        assert_matches_oracle(ours, oracle, random_inputs(VOCAB))
