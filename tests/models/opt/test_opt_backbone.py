"""OPTBackbone presets and parameter counts; shared tests: test_gpt2_family."""

import numpy as np
import pytest
from keras import ops

from keras_nlp.models.opt.opt_backbone import OPTBackbone
from tests.models.gpt2.test_gpt2_family import INPUTS
from tests.models.gpt2.test_gpt2_family import TINY
from tests.models.gpt2.test_gpt2_family import block_params
from tests.models.gpt2.test_gpt2_family import expected_paths
from tests.models.gpt2.test_gpt2_family import full_params


def test_opt_125m_paths_without_allocating():
    plan = OPTBackbone.plan_layout(
        {"batch": 1, "model": 1}, preset="opt_125m_en"
    )
    actual = {w.path: w.shape for w in plan.weights}
    assert actual == expected_paths(
        12, V=50272, P=2048, H=768, N=12, F=3072, prefix="embeddings/"
    )


@pytest.mark.parametrize(
    "preset, expected",
    [
        # The reference's full-model counts (they match keras-hub's
        # metadata).
        ("opt_125m_en", 125_237_760),
        ("opt_1.3b_en", 1_315_753_984),
        # Not in the reference: V=50272, P=2048, L=32, H=2560, F=10240:
        # 50272*2560 + 2048*2560 + 32*(4*(2560*2560 + 2560) + 4*2560
        # + 2*2560*10240 + 10240 + 2560) + 2*2560.
        ("opt_2.7b_en", full_params(50272, 2048, 32, 2560, 10240)),
        # H=4096, F=16384, otherwise as above.
        ("opt_6.7b_en", full_params(50272, 2048, 32, 4096, 16384)),
    ],
)
def test_preset_parameter_counts(preset, expected):
    plan = OPTBackbone.plan_layout({"batch": 1, "model": 1}, preset=preset)
    assert plan.total_params == expected


def test_parameter_count_formula():
    # Per-block counts of the reference for opt_125m_en and opt_1.3b_en.
    assert block_params(768, 3072) == 7_087_872
    assert block_params(2048, 8192) == 50_358_272
    assert full_params(50272, 2048, 12, 768, 3072) == 125_237_760
    assert full_params(50272, 2048, 32, 2560, 10240) == 2_651_591_680
    assert full_params(50272, 2048, 32, 4096, 16384) == 6_658_465_792


def test_preset_configs():
    presets = OPTBackbone.presets
    assert list(presets) == [
        "opt_125m_en",
        "opt_1.3b_en",
        "opt_2.7b_en",
        "opt_6.7b_en",
    ]
    sizes = [
        (c["num_layers"], c["num_heads"], c["hidden_dim"])
        for c in presets.values()
    ]
    assert sizes == [(12, 12, 768), (24, 32, 2048), (32, 32, 2560)] + [
        (32, 32, 4096)
    ]
    head_dims = [c["hidden_dim"] // c["num_heads"] for c in presets.values()]
    assert head_dims == [64, 64, 80, 128]
    for config in presets.values():
        assert config["vocabulary_size"] == 50272
        assert config["max_sequence_length"] == 2048
        assert config["intermediate_dim"] == 4 * config["hidden_dim"]
    model = OPTBackbone.from_preset(
        "opt_2.7b_en",
        load_weights=False,
        num_layers=1,
        vocabulary_size=64,
        hidden_dim=64,
        intermediate_dim=16,
    )
    assert model.num_heads == 32
    assert model.max_sequence_length == 2048


def test_embeddings_are_one_layer_holding_both_tables():
    model = OPTBackbone(**TINY)
    assert model.token_embedding is model.embeddings.token_embedding
    hidden = model(INPUTS)
    logits = model.token_embedding(hidden, reverse=True)
    assert tuple(ops.shape(logits)) == (2, 5, 97)


def test_initial_kernels_are_truncated_at_two_deviations():
    model = OPTBackbone(**TINY)
    for variable in model.weights:
        if variable.path.endswith("/kernel"):
            kernel = ops.convert_to_numpy(variable)
            assert np.abs(kernel).max() <= 0.04 + 1e-6, variable.path
