"""Gemma 3 with its vision encoder: parity with keras-hub, config, layouts.

The shared conformance suite enrols one input signature per class
(`Enrolment.inputs`, checked against `backbone.input`), and
`Gemma3Backbone`'s enrolment is the text-only model; a vision config takes
`images`, `vision_indices` and `vision_mask` as well, so it cannot join
that enrolment. Its conformance checks (JSON config round trip, plan ==
sharding and sharded == unsharded on a mesh, the presets' plans) are here.
"""

import json

import keras
import keras_hub
import numpy as np
import pytest
from keras_hub.src.models.gemma3.gemma3_vision_encoder import (
    Gemma3VisionEncoder as HubVisionEncoder,
)

from keras_nlp.models import Backbone
from keras_nlp.models.gemma3 import Gemma3Backbone
from keras_nlp.saving.preset_files import PresetError
from tests.models.backbone_checks import MESHES
from tests.models.backbone_checks import assert_encoder_matches_oracle
from tests.models.backbone_checks import assert_preset_plan_is_efficient
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import spec_of
from tests.models.backbone_checks import unit_scale_oracle

# 16x16 images, 4x4 patches pooled 2x2: 4 soft tokens per image; a window
# of 3, shorter than an image, so the bidirectional image mask meets the
# sliding window; 4:2 heads and Gemma 3's norms.
VISION = dict(
    image_size=16,
    patch_size=4,
    num_heads=4,
    hidden_dim=16,
    num_layers=2,
    intermediate_dim=24,
    output_dim=32,
    pool_size=2,
)
CONFIG = dict(
    vocabulary_size=64,
    image_size=16,
    num_layers=6,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=64,
    head_dim=8,
    use_sliding_window_attention=True,
    sliding_window_size=3,
    use_post_ffw_norm=True,
    use_post_attention_norm=True,
)
TOKENS_PER_IMAGE = 4
# Where each row's images start: two apart, one (and a padded slot), two
# adjacent ones.
IMAGE_STARTS = [(2, 7), (3,), (1, 5)]


def vision_inputs(length=14, seed=0):
    rng = np.random.default_rng(seed)
    batch = len(IMAGE_STARTS)
    token_ids = rng.integers(1, 64, (batch, length)).astype("int32")
    padding_mask = np.ones((batch, length), "int32")
    padding_mask[0, length - 3 :] = 0  # right padding
    vision_mask = np.zeros((batch, length), "int32")
    vision_indices = np.zeros((batch, 2 * TOKENS_PER_IMAGE), "int32")
    for row, starts in enumerate(IMAGE_STARTS):
        positions = [s + i for s in starts for i in range(TOKENS_PER_IMAGE)]
        vision_indices[row, : len(positions)] = positions
        vision_mask[row, positions] = 1
    return {
        "token_ids": token_ids,
        "padding_mask": padding_mask,
        "images": rng.uniform(-1, 1, (batch, 2, 16, 16, 3)).astype("float32"),
        "vision_indices": vision_indices,
        "vision_mask": vision_mask,
    }


def make_pair(seed=0):
    # The heads-first kernels' fan-in is hidden (32), not their first dim.
    scales = {"token_embedding": 32**-0.5, "decoder_block_": 32**-0.5}
    oracle = unit_scale_oracle(
        "Gemma3Backbone",
        dict(CONFIG, vision_encoder=HubVisionEncoder(**VISION)),
        seed,
        scales,
    )
    ours = Gemma3Backbone(**CONFIG, vision_encoder=dict(VISION))
    return oracle, ours, vision_inputs(seed=seed)


def test_matches_keras_hub():
    oracle, ours, inputs = make_pair()
    max_diff = assert_encoder_matches_oracle(ours, oracle, inputs)
    print(f"gemma3 vision: max |ours - keras_hub| = {max_diff:.3e}")


def causal_images(model):
    """Images attend causally, like text."""
    for block in model.transformer_layers:
        call = block.call

        def causal(inputs, attention_mask=None, call=call, **kwargs):
            length = keras.ops.shape(inputs)[1]
            lower = keras.ops.tril(keras.ops.ones((length, length), "bool"))
            mask = keras.ops.logical_and(attention_mask, lower[None])
            return call(inputs, attention_mask=mask, **kwargs)

        block.call = causal


def reversed_image_tokens(model):
    """An image's soft tokens written in reverse order."""
    layer = model.get_layer("interleave_embeddings")
    call = layer.call

    def reversed_call(image_tokens, text_embeddings, vision_indices):
        return call(image_tokens[:, ::-1], text_embeddings, vision_indices)

    layer.call = reversed_call


@pytest.mark.parametrize("mistake", [causal_images, reversed_image_tokens])
def test_the_comparison_detects_mistakes(mistake):
    oracle, ours, inputs = make_pair()
    assert_encoder_matches_oracle(ours, oracle, inputs)
    mistake(ours)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(
            output_arrays(ours(inputs))["sequence_output"],
            output_arrays(oracle(inputs))["sequence_output"],
            atol=1e-5,
        )


def test_config_round_trips_through_json_and_from_keras_hub():
    oracle, ours, inputs = make_pair()
    config = ours.get_config()
    assert config["vision_encoder"]["class_name"] == "Gemma3VisionEncoder"
    clone = Gemma3Backbone.from_config(json.loads(json.dumps(config)))
    assert clone.get_config() == config
    assert set(clone.input) == set(inputs)
    assert [v.path for v in clone.weights] == [v.path for v in ours.weights]
    # keras-hub's config (its serialized encoder) builds ours.
    theirs = Gemma3Backbone.from_config(oracle.get_config())
    assert theirs.num_vision_tokens_per_image == TOKENS_PER_IMAGE
    assert sorted(v.path for v in theirs.weights) == sorted(
        v.path for v in oracle.weights
    )


def test_text_only_model_has_no_vision_inputs():
    text = Gemma3Backbone(**CONFIG)
    assert set(text.input) == {"token_ids", "padding_mask"}
    assert text.get_config()["vision_encoder"] is None
    assert not any(p.startswith("image_") for p in map(str, text.weights))


@pytest.mark.multi_device
# The 8-way model axis, which divides neither tower's 4 heads nor the
# text's 2 key/value heads: the most fallbacks.
@pytest.mark.parametrize("mesh_shape", [(1, 8)], ids=str)
def test_sharded_matches_unsharded(mesh_shape):
    oracle, ours, inputs = make_pair()
    assert_encoder_matches_oracle(ours, oracle, inputs)
    expected = output_arrays(ours(inputs))["sequence_output"]
    distribution = keras.distribution.ModelParallel(
        layout_map=Gemma3Backbone.get_layout_map(make_mesh(mesh_shape)),
        batch_dim_name="batch",
    )
    with distribution.scope():
        # The encoder config is built inside the scope, so it is sharded.
        sharded = Gemma3Backbone(**CONFIG, vision_encoder=dict(VISION))
        sharded.set_weights(ours.get_weights())
        actual = output_arrays(sharded(inputs))["sequence_output"]
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-5)
    planned = {w.path: w.spec for w in sharded.layout_plan.weights}
    assert {v.path: spec_of(v) for v in sharded.weights} == planned
    attention = "image_encoder/encoder_block_1/multi_head_attention/"
    assert planned[attention + "query_proj/kernel"][1] == "model"


@pytest.mark.multi_device
@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("preset", ["gemma3_4b", "gemma3_12b", "gemma3_27b"])
def test_vision_preset_plan_is_efficient(preset, mesh_shape):
    plan = assert_preset_plan_is_efficient(Gemma3Backbone, preset, mesh_shape)
    # The vision tower's 16 heads divide every model axis: no vision
    # weight falls back.
    assert not [w.path for w in plan.fallbacks if "image" in w.path]


def test_vision_presets_match_keras_hub_parameter_counts():
    listed = keras_hub.src.models.gemma3.gemma3_presets.backbone_presets
    for preset in ("gemma3_4b", "gemma3_12b", "gemma3_27b"):
        plan = Gemma3Backbone.plan_layout(
            {"batch": 1, "model": 1}, preset=preset
        )
        assert plan.total_params == listed[preset]["metadata"]["params"]


def test_keras_hub_vision_preset_loads_bit_identically(tmp_path):
    # keras-hub writes a preset of a Gemma 3 with a vision encoder; ours
    # reads the class, the encoder's config and every weight from it.
    oracle, _, inputs = make_pair()
    oracle.save_to_preset(str(tmp_path))
    ours = Backbone.from_preset(str(tmp_path))
    assert type(ours) is Gemma3Backbone
    assert ours.get_config()["vision_encoder"] is not None
    theirs = {v.path: keras.ops.convert_to_numpy(v) for v in oracle.weights}
    mine = {v.path: keras.ops.convert_to_numpy(v) for v in ours.weights}
    assert sorted(mine) == sorted(theirs)
    for path, value in theirs.items():
        np.testing.assert_array_equal(mine[path], value, err_msg=path)
    # Ours saves it the same way and loads it back; any other class in
    # that argument is refused, never deserialized.
    ours.save_to_preset(str(tmp_path / "ours"))
    again = Backbone.from_preset(str(tmp_path / "ours"))
    assert again.get_config() == ours.get_config()
    config_file = tmp_path / "ours" / "config.json"
    saved = json.loads(config_file.read_text())
    saved["config"]["vision_encoder"]["class_name"] = "Lambda"
    config_file.write_text(json.dumps(saved))
    with pytest.raises(PresetError, match="takes only Gemma3VisionEncoder"):
        Backbone.from_preset(str(tmp_path / "ours"))
