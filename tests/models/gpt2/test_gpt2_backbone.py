"""GPT2Backbone presets and parameter counts; shared tests: test_gpt2_family."""

import pytest

from keras_nlp.models.gpt2.gpt2_backbone import GPT2Backbone
from tests.models.gpt2.test_gpt2_family import block_params
from tests.models.gpt2.test_gpt2_family import expected_paths
from tests.models.gpt2.test_gpt2_family import full_params


def test_gpt2_base_paths_without_allocating():
    plan = GPT2Backbone.plan_layout(
        {"batch": 1, "model": 1}, preset="gpt2_base_en"
    )
    actual = {w.path: w.shape for w in plan.weights}
    assert actual == expected_paths(12, V=50257, P=1024, H=768, N=12, F=3072)


# The reference's full-model counts (they match keras-hub's metadata).
@pytest.mark.parametrize(
    "preset, expected",
    [
        ("gpt2_base_en", 124_439_808),
        ("gpt2_medium_en", 354_823_168),
        ("gpt2_large_en", 774_030_080),
        ("gpt2_extra_large_en", 1_557_611_200),
    ],
)
def test_preset_parameter_counts(preset, expected):
    plan = GPT2Backbone.plan_layout({"batch": 1, "model": 1}, preset=preset)
    assert plan.total_params == expected
    config = GPT2Backbone.presets[preset]
    assert expected == full_params(
        config["vocabulary_size"],
        config["max_sequence_length"],
        config["num_layers"],
        config["hidden_dim"],
        config["intermediate_dim"],
    )


def test_block_formula_matches_the_reference():
    # Per-block counts of the reference for gpt2_base_en and gpt2_xl.
    assert block_params(768, 3072) == 7_087_872
    assert block_params(1600, 6400) == 30_740_800


def test_preset_configs():
    presets = GPT2Backbone.presets
    assert list(presets) == [
        "gpt2_base_en",
        "gpt2_medium_en",
        "gpt2_large_en",
        "gpt2_extra_large_en",
    ]
    sizes = [
        (c["num_layers"], c["num_heads"], c["hidden_dim"])
        for c in presets.values()
    ]
    assert sizes == [(12, 12, 768), (24, 16, 1024), (36, 20, 1280)] + [
        (48, 25, 1600)
    ]
    for config in presets.values():
        assert config["vocabulary_size"] == 50257
        assert config["max_sequence_length"] == 1024
        assert config["intermediate_dim"] == 4 * config["hidden_dim"]
        assert config["hidden_dim"] // config["num_heads"] == 64
    model = GPT2Backbone.from_preset(
        "gpt2_extra_large_en",
        load_weights=False,
        num_layers=1,
        vocabulary_size=64,
        hidden_dim=50,  # 25 heads of 2
        intermediate_dim=16,
    )
    assert model.num_heads == 25
    assert model.max_sequence_length == 1024
