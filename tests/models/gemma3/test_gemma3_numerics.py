"""Numerical parity of keras_nlp's Gemma 3 with keras-hub's (the oracle)."""

import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

from keras_nlp.models.gemma3.gemma3_backbone import Gemma3Backbone
from tests.models.backbone_checks import assert_matches_oracle
from tests.models.backbone_checks import copy_weights_by_path
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import random_inputs

VOCAB = 64
# 7 layers: blocks 0-4 and 6 are local when sliding windows are on, block 5
# is global, so both kinds (and both RoPE wavelengths) are exercised.
_TINY = dict(
    vocabulary_size=VOCAB,
    image_size=None,
    num_layers=7,
    hidden_dim=32,
    intermediate_dim=48,
    head_dim=8,
)
CONFIGS = {
    # gemma3_270m / 1b-like: multi-query, q/k norms, post-norms, a small
    # window and RoPE scaling on both kinds of layer.
    "mqa_4_1_qk_norm_window": dict(
        _TINY,
        num_query_heads=4,
        num_key_value_heads=1,
        use_query_key_norm=True,
        use_post_ffw_norm=True,
        use_post_attention_norm=True,
        use_sliding_window_attention=True,
        sliding_window_size=3,
        local_rope_scaling_factor=2.0,
        global_rope_scaling_factor=8.0,
    ),
    # gemma3_27b-like: grouped, queries scaled by hidden/heads (4) rather
    # than head_dim (8), and small soft caps so tanh is far from linear.
    "gqa_8_4_qk_norm_caps": dict(
        _TINY,
        num_query_heads=8,
        num_key_value_heads=4,
        use_query_key_norm=True,
        use_post_ffw_norm=True,
        use_post_attention_norm=True,
        query_head_dim_normalize=False,
        attention_logit_soft_cap=1.0,
        final_logit_soft_cap=0.5,
        use_sliding_window_attention=True,
        sliding_window_size=2,
        global_rope_scaling_factor=4.0,
    ),
    # Multi-head without q/k norms or windows: every layer is global.
    "mha_4_4_no_qk_norm": dict(
        _TINY,
        num_query_heads=4,
        num_key_value_heads=4,
        use_query_key_norm=False,
    ),
    # Grouped without q/k norms, windowed, bidirectional (embedding-style).
    "gqa_4_2_bidirectional_window": dict(
        _TINY,
        num_query_heads=4,
        num_key_value_heads=2,
        use_query_key_norm=False,
        use_post_attention_norm=True,
        use_sliding_window_attention=True,
        sliding_window_size=4,
        use_bidirectional_attention=True,
    ),
}


def make_oracle(config, seed=0):
    keras.utils.set_random_seed(seed)
    oracle = keras_hub.models.Gemma3Backbone(**config)
    # keras-hub's decoder block always builds its attention with
    # `query_head_dim_normalize=True`, ignoring the backbone argument (the
    # 27B checkpoint needs False: queries scaled by 168 ** -0.5, not
    # 128 ** -0.5). The flag is read at call time, so set it to what the
    # config asks for; ours honours the argument.
    for block in oracle.transformer_layers:
        block.attention.query_head_dim_normalize = config.get(
            "query_head_dim_normalize", True
        )
    return oracle


@pytest.mark.parametrize("name", list(CONFIGS))
def test_matches_keras_hub(name):
    config = CONFIGS[name]
    oracle = make_oracle(config)
    ours = Gemma3Backbone(**config)
    inputs = random_inputs(VOCAB)
    max_diff = assert_matches_oracle(ours, oracle, inputs)
    print(f"{name}: max |ours - keras_hub| = {max_diff:.3e}")

    # The tied embedding projects back to (soft-capped) vocabulary logits.
    hidden = ours(inputs)
    expected = ops.convert_to_numpy(
        oracle.token_embedding(oracle(inputs), reverse=True)
    )
    logits = ops.convert_to_numpy(ours.token_embedding(hidden, reverse=True))
    np.testing.assert_allclose(logits, expected, atol=1e-4, rtol=1e-5)
    cap = config.get("final_logit_soft_cap")
    if cap is not None:
        embeddings = ops.convert_to_numpy(ours.token_embedding.embeddings.value)
        uncapped = ops.convert_to_numpy(hidden) @ embeddings.T
        assert np.abs(uncapped).max() > 2 * cap  # the cap is exercised
        np.testing.assert_allclose(
            logits, cap * np.tanh(uncapped / cap), atol=1e-5
        )


@pytest.mark.parametrize(
    "mutation",
    ["swap_wavelengths", "drop_rope_scaling", "window_off", "qk_norm_off"],
)
def test_each_gemma3_feature_changes_the_output(mutation):
    """The parity test is sensitive to every Gemma 3 specific setting."""
    config = CONFIGS["mqa_4_1_qk_norm_window"]
    oracle = make_oracle(config)
    ours = Gemma3Backbone(**config)
    inputs = random_inputs(VOCAB)
    assert_matches_oracle(ours, oracle, inputs)
    for block in ours.transformer_layers:
        attention = block.attention
        rope = attention.rotary_embedding
        if mutation == "swap_wavelengths":
            rope.max_wavelength = 1e6 if rope.max_wavelength == 1e4 else 1e4
        elif mutation == "drop_rope_scaling":
            rope.scaling_factor = 1.0
        elif mutation == "window_off":
            attention.sliding_window_size = None
        else:
            attention.use_query_key_norm = False
    expected = ops.convert_to_numpy(oracle(inputs))
    actual = ops.convert_to_numpy(ours(inputs))
    assert np.max(np.abs(actual - expected)) > 1e-3


def test_padded_rows_do_not_change_real_tokens():
    """Left padding must not affect the representations of real tokens."""
    config = CONFIGS["gqa_8_4_qk_norm_caps"]
    ours = Gemma3Backbone(**config)
    inputs = random_inputs(VOCAB)  # row 0 has 3 left-padded positions
    padded = ops.convert_to_numpy(ours(inputs))
    unpadded = ops.convert_to_numpy(
        ours(
            {
                "token_ids": inputs["token_ids"][:1, 3:],
                "padding_mask": inputs["padding_mask"][:1, 3:],
            }
        )
    )
    # RoPE (also when scaled) only depends on relative positions, and so do
    # the windows, hence real tokens agree.
    np.testing.assert_allclose(padded[:1, 3:], unpadded, atol=1e-5)


def test_embedding_model_matches_keras_hub():
    """Both outputs of the pooling head, on left-padded rows."""
    config = dict(
        CONFIGS["gqa_4_2_bidirectional_window"],
        is_embedding_model=True,
        pooling_intermediate_dim=40,
        embedding_dim=24,
    )
    oracle = make_oracle(config)
    ours = Gemma3Backbone(**config)
    inputs = random_inputs(VOCAB)  # row 0 has 3 left-padded positions
    copy_weights_by_path(oracle, ours)
    expected = output_arrays(oracle(inputs))
    actual = output_arrays(ours(inputs))
    assert sorted(actual) == ["pooled_output", "sequence_output"]
    real = inputs["padding_mask"].astype(bool)
    np.testing.assert_allclose(
        actual["sequence_output"][real],
        expected["sequence_output"][real],
        atol=1e-5,
        rtol=1e-5,
    )
    # The mean skips the padded positions: row 0 pools as if unpadded.
    unpadded = output_arrays(
        ours({name: value[:1, 3:] for name, value in inputs.items()})
    )
    np.testing.assert_allclose(
        unpadded["pooled_output"], actual["pooled_output"][:1], atol=1e-5
    )
