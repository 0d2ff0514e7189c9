"""Gemma 3 with its vision encoder: keras-hub's configs, presets, layouts.

The shared conformance suite enrols one input signature per class
(`Enrolment.inputs`, checked against `backbone.input`), and
`Gemma3Backbone`'s enrolment is the text-only model; a vision config takes
`images`, `vision_indices` and `vision_mask` as well, so it cannot join
that enrolment. Its conformance checks (JSON config round trip, plan ==
sharding and sharded == unsharded on a mesh, the presets' plans) are here.
"""

import copy
import json
import pickle

import keras
import numpy as np
import pytest

from keras_nlp.models import Backbone
from keras_nlp.models.gemma3 import Gemma3Backbone
from keras_nlp.models.gemma3 import Gemma3VisionEncoder
from keras_nlp.models.gemma3.gemma3_backbone import VisionAttentionMask
from keras_nlp.models.gemma3.gemma3_backbone import vision_encoder_from
from keras_nlp.saving.preset_config import read_backbone_config
from keras_nlp.saving.preset_files import PresetError
from tests.models.backbone_checks import assert_outputs_close
from tests.models.backbone_checks import assign_unit_scale
from tests.models.backbone_checks import jit_forward
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import spec_of
from tests.models.oracle_cases import GEMMA3_VISION as VISION
from tests.models.oracle_cases import GEMMA3_VISION_CONFIG as CONFIG
from tests.models.oracle_cases import gemma3_vision_inputs

# Its outputs equal keras-hub's: the "gemma3-vision" row of the oracle
# table (tests/models/oracle_cases.py), with its mistakes.
TOKENS_PER_IMAGE = 4


def make_ours():
    ours = Gemma3Backbone(**CONFIG, vision_encoder=dict(VISION))
    assign_unit_scale(ours)
    return ours


@pytest.fixture(scope="module")
def keras_hub_model():
    """keras-hub's Gemma 3 with a vision encoder (its own weights)."""
    import keras_hub
    from keras_hub.src.models.gemma3.gemma3_vision_encoder import (
        Gemma3VisionEncoder,
    )

    return keras_hub.models.Gemma3Backbone(
        **CONFIG, vision_encoder=Gemma3VisionEncoder(**VISION)
    )


def test_config_round_trips_through_json_and_from_keras_hub(keras_hub_model):
    oracle, ours, inputs = keras_hub_model, make_ours(), gemma3_vision_inputs()
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
    ours, inputs = make_ours(), gemma3_vision_inputs()
    expected = jit_forward(ours, inputs)["sequence_output"]
    distribution = keras.distribution.ModelParallel(
        layout_map=Gemma3Backbone.get_layout_map(make_mesh(mesh_shape)),
        batch_dim_name="batch",
    )
    with distribution.scope():
        # The encoder config is built inside the scope, so it is sharded.
        sharded = Gemma3Backbone(**CONFIG, vision_encoder=dict(VISION))
        sharded.set_weights(ours.get_weights())
        actual = jit_forward(sharded, inputs)["sequence_output"]
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-5)
    planned = {w.path: w.spec for w in sharded.layout_plan.weights}
    assert {v.path: spec_of(v) for v in sharded.weights} == planned
    # The tower's 4 heads of 4 stay whole on the 8-way axis (2 columns
    # each would cut them); the contracted output rows may split anywhere.
    attention = "image_encoder/encoder_block_1/multi_head_attention/"
    query = sharded.layout_plan.weight(attention + "query_proj/kernel")
    assert query.spec[1] is None
    assert "(heads, size 16 = 4 heads of 4) split by 'model'" in query.reason
    assert planned[attention + "out_proj/kernel"][0] == "model"


def test_vision_presets_match_keras_hub_parameter_counts():
    import keras_hub

    listed = keras_hub.src.models.gemma3.gemma3_presets.backbone_presets
    for preset in ("gemma3_4b", "gemma3_12b", "gemma3_27b"):
        plan = Gemma3Backbone.plan_layout(
            {"batch": 1, "model": 1}, preset=preset
        )
        assert plan.total_params == listed[preset]["metadata"]["params"]


def test_keras_hub_vision_preset_loads_bit_identically(
    tmp_path, keras_hub_model
):
    # keras-hub writes a preset of a Gemma 3 with a vision encoder; ours
    # reads the class, the encoder's config and every weight from it.
    oracle = keras_hub_model
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
    # Presets written when the encoder was registered as `keras_nlp>`
    # still read (keras-hub's, `keras_hub>`, load above).
    encoder = saved["config"]["vision_encoder"]
    assert encoder["registered_name"] == "keras_nlp.models>Gemma3VisionEncoder"
    encoder["registered_name"] = "keras_nlp>Gemma3VisionEncoder"
    config_file.write_text(json.dumps(saved))
    cls, config = read_backbone_config(str(tmp_path / "ours"))
    assert cls is Gemma3Backbone
    assert (
        config["vision_encoder"]["config"]["pool_size"] == VISION["pool_size"]
    )
    saved["config"]["vision_encoder"]["class_name"] = "Lambda"
    config_file.write_text(json.dumps(saved))
    with pytest.raises(PresetError, match="takes only Gemma3VisionEncoder"):
        Backbone.from_preset(str(tmp_path / "ours"))


def _round_trips(model, tmp_path, pickled=True):
    """`model` copied, pickled and through a `.keras` file, by name."""
    path = str(tmp_path / f"{model.name}.keras")
    model.save(path)
    copies = {
        "deepcopy": copy.deepcopy(model),
        ".keras": keras.saving.load_model(path),
    }
    if pickled:
        copies["pickle"] = pickle.loads(pickle.dumps(model))
    return copies


def _specs(outputs):
    if not isinstance(outputs, dict):
        outputs = {"sequence_output": outputs}
    return {
        name: (tuple(value.shape), keras.backend.standardize_dtype(value.dtype))
        for name, value in outputs.items()
    }


def test_copies_and_keras_files_rebuild_ours_with_keras_hub_imported(
    tmp_path,
):
    # keras-hub registers its own Gemma3VisionEncoder as `keras_hub>` and
    # `keras_nlp>`: once it is imported, ours must not be rebuilt as theirs.
    import keras_hub  # noqa: F401

    # One block of each: every copy is a `.keras` write and read.
    ours = Gemma3Backbone(
        **dict(CONFIG, num_layers=1),
        vision_encoder=dict(VISION, num_layers=1),
    )
    assign_unit_scale(ours)
    inputs = gemma3_vision_inputs()
    encoder, images = ours.vision_encoder, inputs["images"]
    name = keras.saving.get_registered_name(Gemma3VisionEncoder)
    assert keras.saving.get_registered_object(name) is Gemma3VisionEncoder
    expected = jit_forward(ours, inputs)
    expected_tokens = jit_forward(encoder, images)
    # A Keras model pickles as it deep-copies (a `.keras` file in memory):
    # the backbone's pickle would repeat its deepcopy.
    for how, copied in _round_trips(ours, tmp_path, pickled=False).items():
        assert type(copied) is Gemma3Backbone, how
        assert type(copied.vision_encoder) is Gemma3VisionEncoder, how
        assert_outputs_close(jit_forward(copied, inputs), expected, atol=0)
    for how, copied in _round_trips(encoder, tmp_path).items():
        assert type(copied) is Gemma3VisionEncoder, how
        assert_outputs_close(
            jit_forward(copied, images), expected_tokens, atol=0
        )
    # Configs written before, under `keras_nlp>`, still build ours.
    old = dict(keras.layers.serialize(encoder))
    old["registered_name"] = "keras_nlp>Gemma3VisionEncoder"
    assert type(vision_encoder_from(old)) is Gemma3VisionEncoder
    # Shape inference from NumPy inputs, as keras-hub's tests call it.
    assert _specs(ours.compute_output_spec(inputs)) == _specs(expected)
    assert _specs(encoder.compute_output_spec(images)) == _specs(
        expected_tokens
    )
    # The attention mask's spec is its traced call's: boolean.
    (mask,) = [
        layer for layer in ours.layers if isinstance(layer, VisionAttentionMask)
    ]
    masks = (inputs["padding_mask"], inputs["vision_mask"])
    # Keras's own inference, which traces `call`.
    traced = keras.Operation.compute_output_spec(mask, *masks)
    assert _specs(mask.compute_output_spec(*masks)) == _specs(traced)
    assert traced.dtype == "bool"
