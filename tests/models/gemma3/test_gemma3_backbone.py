"""Gemma3Backbone: structure, configs, presets and argument errors."""

import re

import keras
import numpy as np
import pytest
from keras import ops

from keras_nlp.models.gemma.gemma_decoder_block import GemmaDecoderBlock
from keras_nlp.models.gemma3.gemma3_backbone import Gemma3Backbone
from tests.models.gemma.decoding import decode_step_by_step

TINY = dict(
    vocabulary_size=64,
    image_size=None,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=48,
    head_dim=8,
)
GEMMA3_OPTIONS = dict(
    use_query_key_norm=True,
    use_post_ffw_norm=True,
    use_post_attention_norm=True,
    attention_logit_soft_cap=50.0,
    final_logit_soft_cap=30.0,
    use_sliding_window_attention=True,
    sliding_window_size=3,
    local_rope_scaling_factor=2.0,
    global_rope_scaling_factor=8.0,
    query_head_dim_normalize=False,
)
INPUTS = {
    "token_ids": np.array([[5, 9, 2, 7, 1], [0, 0, 3, 4, 8]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], "int32"),
}
# Full-model parameter counts of the keras-hub checkpoints (reference).
PRESET_PARAMS = {
    "gemma3_270m": 268_098_176,
    "gemma3_1b": 999_885_952,
    "gemma3_4b_text": 3_880_099_328,
    "gemma3_12b_text": 11_765_788_416,
    "gemma3_27b_text": 27_009_002_240,
}


def expected_paths(num_layers, qk_norm, post_norms, V=64, H=32, Dh=8, F=48):
    paths = {"token_embedding/embeddings": (V, H)}
    for i in range(num_layers):
        block = f"decoder_block_{i}"
        paths[f"{block}/pre_attention_norm/scale"] = (H,)
        paths[f"{block}/attention/query/kernel"] = (4, H, Dh)
        paths[f"{block}/attention/key/kernel"] = (2, H, Dh)
        paths[f"{block}/attention/value/kernel"] = (2, H, Dh)
        paths[f"{block}/attention/attention_output/kernel"] = (4, Dh, H)
        paths[f"{block}/pre_ffw_norm/scale"] = (H,)
        # Gemma 3's branches are intermediate_dim wide (Gemma's are half).
        paths[f"{block}/ffw_gating/kernel"] = (H, F)
        paths[f"{block}/ffw_gating_2/kernel"] = (H, F)
        paths[f"{block}/ffw_linear/kernel"] = (F, H)
        if qk_norm:
            paths[f"{block}/attention/query_norm/scale"] = (Dh,)
            paths[f"{block}/attention/key_norm/scale"] = (Dh,)
        if post_norms:
            paths[f"{block}/post_attention_norm/scale"] = (H,)
            paths[f"{block}/post_ffw_norm/scale"] = (H,)
    paths["final_normalization/scale"] = (H,)
    return paths


@pytest.mark.parametrize(
    "options, qk_norm, post_norms",
    [
        ({"use_query_key_norm": False}, False, False),
        ({}, True, False),  # q/k norms are on by default
        (GEMMA3_OPTIONS, True, True),
    ],
    ids=["plain", "qk_norm", "gemma3"],
)
def test_variable_paths_and_shapes(options, qk_norm, post_norms):
    model = Gemma3Backbone(**TINY, **options)
    actual = {v.path: tuple(v.shape) for v in model.weights}
    assert len(actual) == len(model.weights)  # no duplicate paths
    assert actual == expected_paths(2, qk_norm, post_norms)
    assert model.token_embedding.name == "token_embedding"
    assert model.layer_norm.name == "final_normalization"


@pytest.mark.parametrize("preset", list(PRESET_PARAMS))
def test_preset_parameter_counts_match_the_reference(preset):
    plan = Gemma3Backbone.plan_layout({"batch": 1, "model": 1}, preset=preset)
    assert plan.total_params == PRESET_PARAMS[preset]


def test_presets_are_the_five_text_models_and_three_multimodal_ones():
    presets = Gemma3Backbone.presets
    text = [name for name in presets if "vision_encoder" not in presets[name]]
    assert sorted(text) == sorted(PRESET_PARAMS)
    # With the vision encoder (tests/models/gemma3/test_gemma3_vision.py).
    assert sorted(set(presets) - set(text)) == [
        "gemma3_12b",
        "gemma3_27b",
        "gemma3_4b",
    ]
    for config in presets.values():
        assert config["use_query_key_norm"] is True
        assert config["use_sliding_window_attention"] is True
    assert not Gemma3Backbone.presets["gemma3_27b_text"][
        "query_head_dim_normalize"
    ]


def test_gemma3_1b_paths_without_allocating():
    plan = Gemma3Backbone.plan_layout(
        {"batch": 1, "model": 1}, preset="gemma3_1b"
    )
    shapes = {w.path: w.shape for w in plan.weights}
    block = "decoder_block_25/"
    assert shapes["token_embedding/embeddings"] == (262144, 1152)
    assert shapes[block + "attention/query/kernel"] == (4, 1152, 256)
    assert shapes[block + "attention/key/kernel"] == (1, 1152, 256)
    assert shapes[block + "attention/query_norm/scale"] == (256,)
    assert shapes[block + "attention/key_norm/scale"] == (256,)
    assert shapes[block + "ffw_gating/kernel"] == (1152, 6912)
    assert shapes[block + "ffw_linear/kernel"] == (6912, 1152)
    assert "decoder_block_26/pre_ffw_norm/scale" not in shapes


def test_five_local_layers_then_one_global():
    model = Gemma3Backbone(**{**TINY, "num_layers": 13}, **GEMMA3_OPTIONS)
    attention = [block.attention for block in model.transformer_layers]
    local = [a.sliding_window_size is not None for a in attention]
    assert [i for i, is_local in enumerate(local) if not is_local] == [5, 11]
    for layer, is_local in zip(attention, local, strict=True):
        assert layer.heads_first
        assert layer.use_query_key_norm
        assert layer.zero_centered_query_key_norm
        assert layer.logit_soft_cap == 50.0
        # query_head_dim_normalize=False: scaled by (32 / 4) ** -0.5.
        assert layer.query_scale == 8**-0.5
        rope = layer.rotary_embedding
        if is_local:
            assert layer.sliding_window_size == 3
            assert (rope.max_wavelength, rope.scaling_factor) == (10_000, 2)
        else:
            assert (rope.max_wavelength, rope.scaling_factor) == (1e6, 8)


def test_without_sliding_window_every_layer_is_global():
    model = Gemma3Backbone(
        **{**TINY, "num_layers": 7}, global_rope_scaling_factor=4.0
    )
    for block in model.transformer_layers:
        assert block.attention.sliding_window_size is None
        assert block.attention.rotary_embedding.max_wavelength == 1e6
        assert block.attention.rotary_embedding.scaling_factor == 4.0


@pytest.mark.parametrize(
    "options", [{}, GEMMA3_OPTIONS], ids=["defaults", "gemma3"]
)
def test_blocks_decode_into_a_kv_cache_like_the_full_forward_pass(options):
    # Six layers: five local ones (window 3), then a global one.
    model = Gemma3Backbone(**{**TINY, "num_layers": 6}, **options)
    expected = ops.convert_to_numpy(model(INPUTS))
    actual = decode_step_by_step(model, INPUTS)
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-5)


def test_bidirectional_blocks_refuse_a_cache():
    model = Gemma3Backbone(**TINY, use_bidirectional_attention=True)
    with pytest.raises(ValueError, match="cannot decode into a cache"):
        decode_step_by_step(model, INPUTS)


def test_config_names_keras_hubs_text_only_arguments():
    # The generic round trip is in tests/models/test_conformance.py; these
    # keras-hub arguments are in every config, with their text-only values.
    config = Gemma3Backbone(**TINY).get_config()
    assert config["vision_encoder"] is None
    assert config["is_embedding_model"] is False


def test_configs_are_interchangeable_with_keras_hub():
    keras_hub = pytest.importorskip("keras_hub")
    ours = Gemma3Backbone(**TINY, **GEMMA3_OPTIONS)
    theirs = keras_hub.models.Gemma3Backbone.from_config(ours.get_config())
    assert sorted(v.path for v in theirs.weights) == sorted(
        v.path for v in ours.weights
    )
    back = Gemma3Backbone.from_config(theirs.get_config())
    assert back.get_config()["image_size"] is None
    for key in ("local_rope_scaling_factor", "global_rope_scaling_factor"):
        assert back.get_config()[key] == GEMMA3_OPTIONS[key]


def test_bidirectional_attention_sees_later_tokens():
    ids = INPUTS["token_ids"][:1]
    changed = ids.copy()
    changed[0, -1] = 11
    mask = np.ones_like(ids)
    for bidirectional in (False, True):
        model = Gemma3Backbone(
            **TINY, use_bidirectional_attention=bidirectional
        )
        first = ops.convert_to_numpy(
            model({"token_ids": ids, "padding_mask": mask})
        )
        second = ops.convert_to_numpy(
            model({"token_ids": changed, "padding_mask": mask})
        )
        # Changing the last token moves earlier outputs only if they can
        # attend to it.
        moved = not np.allclose(first[:, :-1], second[:, :-1])
        assert moved == bidirectional


def test_vision_encoder_is_rejected():
    with pytest.raises(ValueError) as error:
        Gemma3Backbone(**TINY, vision_encoder=keras.layers.Dense(4))
    message = str(error.value)
    assert "vision_encoder" in message
    assert "must be None" in message
    assert "Dense" in message


EMBEDDING_HEAD = dict(
    is_embedding_model=True, pooling_intermediate_dim=24, embedding_dim=16
)


def test_embedding_model_config_round_trips_through_keras_hub():
    keras_hub = pytest.importorskip("keras_hub")
    ours = Gemma3Backbone(**TINY, **EMBEDDING_HEAD)
    config = ours.get_config()
    for name, value in EMBEDDING_HEAD.items():
        assert config[name] == value
    paths = {v.path: tuple(v.shape) for v in ours.weights}
    assert paths == {
        **expected_paths(2, qk_norm=True, post_norms=False),
        "pooling_dense_1/kernel": (32, 24),
        "embedding_projection/kernel": (24, 16),
    }
    theirs = keras_hub.models.Gemma3Backbone.from_config(config)
    assert {v.path: tuple(v.shape) for v in theirs.weights} == paths
    back = Gemma3Backbone.from_config(theirs.get_config())
    assert back.get_config() == config
    outputs = back(INPUTS)
    assert sorted(outputs) == ["pooled_output", "sequence_output"]
    assert tuple(outputs["sequence_output"].shape) == (2, 5, 32)
    norms = np.linalg.norm(
        ops.convert_to_numpy(outputs["pooled_output"]), axis=-1
    )
    np.testing.assert_allclose(norms, [1.0, 1.0], atol=1e-5)


@pytest.mark.parametrize(
    "options, bad",
    [
        (dict(EMBEDDING_HEAD, embedding_dim=None), "embedding_dim=None"),
        ({"embedding_dim": 16}, "embedding_dim=16"),
    ],
    ids=["missing_width", "width_without_head"],
)
def test_invalid_embedding_head_arguments(options, bad):
    with pytest.raises(ValueError) as error:
        Gemma3Backbone(**TINY, **options)
    message = str(error.value)
    assert bad in message
    assert "is_embedding_model=True" in message


def test_invalid_head_ratio():
    with pytest.raises(ValueError) as error:
        Gemma3Backbone(
            **{**TINY, "num_query_heads": 6, "num_key_value_heads": 4}
        )
    message = str(error.value)
    assert "num_query_heads=6" in message
    assert "num_key_value_heads=4" in message
    assert "must divide" in message


@pytest.mark.parametrize(
    "options", [{}, GEMMA3_OPTIONS], ids=["defaults", "gemma3"]
)
def test_training_with_dropout(options):
    model = Gemma3Backbone(**TINY, **options, dropout=0.3)
    train = ops.convert_to_numpy(model(INPUTS, training=True))
    infer = ops.convert_to_numpy(model(INPUTS, training=False))
    assert train.shape == infer.shape == (2, 5, 32)
    assert np.all(np.isfinite(train))
    assert not np.allclose(train, infer)  # dropout is active in training
    np.testing.assert_array_equal(
        infer, ops.convert_to_numpy(model(INPUTS, training=False))
    )


@pytest.mark.parametrize("documented", [Gemma3Backbone, GemmaDecoderBlock])
def test_docstring_example_runs(documented):
    blocks = re.findall(r"```python\n(.*?)```", documented.__doc__, re.DOTALL)
    assert blocks, f"{documented.__name__} has no runnable example"
    lines = blocks[-1].splitlines()
    indent = min(len(line) - len(line.lstrip()) for line in lines if line)
    code = "\n".join(line[indent:] for line in lines)
    namespace = {}
    exec(compile(code, documented.__name__, "exec"), namespace)
    result = namespace.get("hidden_states", namespace.get("outputs"))
    assert result is not None and len(result.shape) == 3
