"""Numerical parity of keras_nlp's ALBERT with keras-hub's (the oracle)."""

import keras
import numpy as np
import pytest

from keras_nlp.models.albert.albert_backbone import AlbertBackbone
from tests.models.backbone_checks import assert_encoder_matches_oracle
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import random_inputs
from tests.models.backbone_checks import unit_scale_oracle

# name -> (num_layers, num_groups, num_inner_repetitions, num_heads,
# hidden_dim). The presets' one shared block with 12 heads (base), and
# groups of several blocks, each group run more than once.
CASES = {
    "shared_heads12": (3, 1, 1, 12, 48),
    "groups2_inner2": (4, 2, 2, 4, 32),
    "groups3_inner1": (6, 3, 1, 2, 32),
}


def make_pair(name, seed=0):
    num_layers, num_groups, inner, num_heads, hidden_dim = CASES[name]
    config = dict(
        vocabulary_size=96,
        num_layers=num_layers,
        num_heads=num_heads,
        embedding_dim=16,
        hidden_dim=hidden_dim,
        intermediate_dim=64,
        num_groups=num_groups,
        num_inner_repetitions=inner,
        max_sequence_length=16,
    )
    oracle = unit_scale_oracle("AlbertBackbone", config, seed)
    inputs = random_inputs(96, num_segments=2)
    return oracle, AlbertBackbone(**config), inputs


@pytest.mark.parametrize("name", list(CASES))
def test_matches_keras_hub(name):
    oracle, ours, inputs = make_pair(name)
    max_diff = assert_encoder_matches_oracle(ours, oracle, inputs)
    print(f"albert {name}: max |ours - keras_hub| = {max_diff:.3e}")


def test_blocks_hold_weights_once_per_group_and_inner_layer():
    _, ours, _ = make_pair("groups2_inner2")
    assert [block.name for block in ours.transformer_layers] == [
        "group_0_inner_layer_0",
        "group_0_inner_layer_1",
        "group_1_inner_layer_0",
        "group_1_inner_layer_1",
    ]
    # 4 blocks of 16 variables, plus embeddings, projection and pooler.
    assert len(ours.weights) == 4 * 16 + 9


def test_num_layers_must_be_a_multiple_of_num_groups():
    with pytest.raises(ValueError, match="num_layers=3, num_groups=2"):
        AlbertBackbone(
            vocabulary_size=96,
            num_layers=3,
            num_heads=2,
            embedding_dim=8,
            hidden_dim=16,
            intermediate_dim=32,
            num_groups=2,
        )


def swap_weights(first, second):
    for a, b in zip(first.weights, second.weights, strict=True):
        a_value = keras.ops.convert_to_numpy(a)
        a.assign(keras.ops.convert_to_numpy(b))
        b.assign(a_value)


def swap_groups(model):
    """Group 1's blocks run first: the groups' order is what matters."""
    blocks = {block.name: block for block in model.transformer_layers}
    for inner in (0, 1):
        swap_weights(
            blocks[f"group_0_inner_layer_{inner}"],
            blocks[f"group_1_inner_layer_{inner}"],
        )


def swap_inner_layers(model):
    """Within each group, the second block runs first."""
    blocks = {block.name: block for block in model.transformer_layers}
    for group in (0, 1):
        swap_weights(
            blocks[f"group_{group}_inner_layer_0"],
            blocks[f"group_{group}_inner_layer_1"],
        )


@pytest.mark.parametrize("mistake", [swap_groups, swap_inner_layers])
def test_the_comparison_detects_mistakes(mistake):
    """The check is sharp enough to see blocks called in the wrong order."""
    oracle, ours, inputs = make_pair("groups2_inner2")
    assert_encoder_matches_oracle(ours, oracle, inputs)
    mistake(ours)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(
            output_arrays(ours(inputs))["sequence_output"],
            output_arrays(oracle(inputs))["sequence_output"],
            atol=1e-5,
        )
