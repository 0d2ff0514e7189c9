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


# OPT-350M: post-LayerNorm blocks, a 512-wide token table and projections.
OPT_350M = dict(
    vocabulary_size=50272,
    num_layers=24,
    num_heads=16,
    hidden_dim=1024,
    intermediate_dim=4096,
    max_sequence_length=2048,
    normalize_first=False,
    token_embedding_dim=512,
)


def test_opt_350m_paths_and_parameter_count_without_allocating():
    plan = OPTBackbone.plan_layout({"batch": 1, "model": 1}, config=OPT_350M)
    actual = {w.path: w.shape for w in plan.weights}
    expected = expected_paths(
        24, V=50272, P=2048, H=1024, N=16, F=4096, prefix="embeddings/"
    )
    # No final LayerNorm; a narrow token table and the two projections.
    del expected["layer_norm/gamma"], expected["layer_norm/beta"]
    expected["embeddings/token_embedding/embeddings"] = (50272, 512)
    expected["embeddings/project_in/kernel"] = (512, 1024)
    expected["project_out/kernel"] = (1024, 512)
    assert actual == expected
    # `transformers`' facebook/opt-350m count, 331,196,416, less the two
    # position rows before position 0 our table does not keep.
    assert plan.total_params == 331_196_416 - 2 * 1024


def test_opt_350m_outputs_and_logits_are_token_table_wide():
    model = OPTBackbone(**TINY, normalize_first=False, token_embedding_dim=16)
    assert model.layer_norm is None
    assert all(not block.normalize_first for block in model.transformer_layers)
    hidden = model(INPUTS)
    assert tuple(ops.shape(hidden)) == (2, 5, 16)
    logits = model.token_embedding(hidden, reverse=True)
    assert tuple(ops.shape(logits)) == (2, 5, 97)


def test_defaults_build_no_projections_and_a_final_norm():
    # A token table as wide as the blocks needs no projections.
    for width in (None, TINY["hidden_dim"]):
        model = OPTBackbone(**TINY, token_embedding_dim=width)
        assert model.project_out is None
        assert model.layer_norm is not None
        assert not any("project" in v.path for v in model.weights)


@pytest.mark.parametrize("width", [0, 16.0, True])
def test_bad_token_embedding_dim_is_named(width):
    with pytest.raises(ValueError, match=f"token_embedding_dim={width!r}"):
        OPTBackbone(**TINY, token_embedding_dim=width)
