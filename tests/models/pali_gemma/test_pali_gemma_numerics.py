"""Numerical parity of keras_nlp's PaliGemma with keras-hub's (the oracle).

Every output position is compared, image and text, padded ones too: with
the prefix-LM mask every query sees the image tokens.
"""

import keras
import numpy as np
import pytest

from keras_nlp.models.pali_gemma import PaliGemmaBackbone
from tests.models.backbone_checks import assert_encoder_matches_oracle
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import unit_scale_oracle
from tests.models.tiny_configs import TINY_CONFIGS

ENROLMENT = TINY_CONFIGS["PaliGemmaBackbone"]
_VISION = dict(
    image_size=16,
    vit_patch_size=4,
    vit_hidden_dim=32,
    vit_num_layers=2,
    vit_intermediate_dim=48,
)
# PaliGemma 1 (Gemma 1, 8:1 heads) and PaliGemma 2 (Gemma 2 options, 8:4
# heads, a window shorter than the 16 patches + 12 tokens).
CASES = {
    "pali_gemma1_8_1": dict(
        _VISION,
        vocabulary_size=96,
        num_layers=2,
        num_query_heads=8,
        num_key_value_heads=1,
        hidden_dim=64,
        intermediate_dim=128,
        head_dim=8,
        vit_num_heads=4,
    ),
    "pali_gemma2_8_4_window": dict(
        _VISION,
        vocabulary_size=96,
        num_layers=3,
        num_query_heads=8,
        num_key_value_heads=4,
        hidden_dim=64,
        intermediate_dim=128,
        # Queries scaled by (64 / 8) ** -0.5, not 16 ** -0.5 (as 28b's).
        head_dim=16,
        vit_num_heads=16,
        query_head_dim_normalize=False,
        use_post_ffw_norm=True,
        use_post_attention_norm=True,
        attention_logit_soft_cap=5.0,
        final_logit_soft_cap=30.0,
        use_sliding_window_attention=True,
        sliding_window_size=6,
    ),
}


def make_pair(name, seed=0):
    config = CASES[name]
    # Unit scale for the text side too: its embedding is multiplied by
    # sqrt(hidden_dim) = 8, and its heads-first kernels' first dimension is
    # not their fan-in (which is 64 for each).
    scales = {"token_embedding": 0.125, "decoder_block_": 0.125}
    oracle = unit_scale_oracle("PaliGemmaBackbone", config, seed, scales)
    # keras-hub's Gemma block builds its attention with
    # `query_head_dim_normalize=True` whatever the backbone says; the flag
    # is read at call time, so set it as the config asks.
    for block in oracle.transformer_layers:
        block.attention.query_head_dim_normalize = config.get(
            "query_head_dim_normalize", True
        )
    inputs = ENROLMENT.make_inputs(config)
    return oracle, PaliGemmaBackbone(**config), inputs


@pytest.mark.parametrize("name", list(CASES))
def test_matches_keras_hub(name):
    oracle, ours, inputs = make_pair(name)
    max_diff = assert_encoder_matches_oracle(ours, oracle, inputs)
    print(f"pali_gemma {name}: max |ours - keras_hub| = {max_diff:.3e}")


def test_response_is_causal_and_prefix_bidirectional():
    """A later prompt token changes earlier prompt outputs and the image
    tokens' outputs; a later response token changes nothing before it."""
    _, ours, inputs = make_pair("pali_gemma1_8_1")
    patches = ours.image_sequence_length
    base = output_arrays(ours(inputs))["sequence_output"]
    prompt = {k: v.copy() for k, v in inputs.items()}
    prompt["token_ids"][1, 5] += 1  # row 1: prompt 0..5, response 6..11
    changed = output_arrays(ours(prompt))["sequence_output"]
    assert not np.allclose(changed[1, : patches + 5], base[1, : patches + 5])
    response = {k: v.copy() for k, v in inputs.items()}
    response["token_ids"][1, 9] += 1
    changed = output_arrays(ours(response))["sequence_output"]
    np.testing.assert_array_equal(
        changed[1, : patches + 9], base[1, : patches + 9]
    )
    assert not np.allclose(changed[1, patches + 9], base[1, patches + 9])


def transpose_patches(model):
    """Positions read column-major instead of row-major."""
    table = model.vit_encoder.get_layer(
        "image_encoder"
    ).embeddings.position_embedding.embeddings
    side = int(table.shape[0] ** 0.5)
    values = keras.ops.convert_to_numpy(table)
    values = values.reshape(side, side, -1).transpose(1, 0, 2)
    table.assign(values.reshape(table.shape))


def causal_prompt(model):
    """Drops the prefix-LM mask: every block causal over the prompt too."""
    for block in model.transformer_layers:
        call = block.call

        def causal(inputs, attention_mask=None, call=call, **kwargs):
            length = keras.ops.shape(inputs)[1]
            lower = keras.ops.tril(keras.ops.ones((length, length), "bool"))
            mask = keras.ops.logical_and(attention_mask, lower[None])
            return call(inputs, attention_mask=mask, **kwargs)

        block.call = causal


def no_window(model):
    """PaliGemma 2's local blocks attend globally."""
    model.get_layer("local_mask").sliding_window_size = None


@pytest.mark.parametrize(
    "case, mistake",
    [
        ("pali_gemma1_8_1", transpose_patches),
        ("pali_gemma1_8_1", causal_prompt),
        ("pali_gemma2_8_4_window", no_window),
    ],
)
def test_the_comparison_detects_mistakes(case, mistake):
    oracle, ours, inputs = make_pair(case)
    assert_encoder_matches_oracle(ours, oracle, inputs)
    mistake(ours)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(
            output_arrays(ours(inputs))["sequence_output"],
            output_arrays(oracle(inputs))["sequence_output"],
            atol=1e-5,
        )
