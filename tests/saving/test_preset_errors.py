"""Bad preset directories get errors naming the file, the weight and what
was expected, and never a half-loaded backbone."""

import json
import os

import h5py
import numpy as np
import pytest

from keras_nlp.models import Backbone
from keras_nlp.models import GemmaBackbone
from keras_nlp.models import LlamaBackbone
from keras_nlp.saving import PresetError
from tests.models.tiny_configs import tiny

KEY_KERNEL = "layers/gemma_decoder_block/attention/key_dense/vars/0"


@pytest.fixture
def preset(tmp_path):
    backbone_cls, config = tiny("GemmaBackbone")
    backbone_cls(**config).save_to_preset(str(tmp_path))
    return tmp_path


def edit_config(path, edit):
    config_path = path / "config.json"
    data = json.loads(config_path.read_text())
    edit(data)
    config_path.write_text(json.dumps(data))


def test_missing_config(preset):
    os.remove(preset / "config.json")
    with pytest.raises(
        PresetError, match=r"has no config\.json: .*config\.json"
    ):
        Backbone.from_preset(str(preset))


def test_missing_weights(preset):
    os.remove(preset / "model.weights.h5")
    with pytest.raises(
        PresetError,
        match=r"has no weights: neither model\.weights\.h5 nor "
        r"model\.weights\.json exists\. Pass load_weights=False",
    ):
        Backbone.from_preset(str(preset))
    # The config alone still builds a backbone when asked to.
    backbone = Backbone.from_preset(str(preset), load_weights=False)
    assert isinstance(backbone, GemmaBackbone)


def test_not_json(preset):
    (preset / "config.json").write_text("{not json")
    with pytest.raises(PresetError, match=r"config\.json is not valid JSON"):
        Backbone.from_preset(str(preset))


def test_unknown_class(preset):
    # keras-hub's image segmentation backbone, which this library lacks.
    edit_config(
        preset,
        lambda d: d.update(
            class_name="SAMBackbone", registered_name="keras_hub>SAMBackbone"
        ),
    )
    with pytest.raises(
        PresetError,
        match=r"is for 'keras_hub>SAMBackbone'.*not a keras_nlp backbone.*"
        r"GemmaBackbone",
    ):
        Backbone.from_preset(str(preset))


def test_foreign_module_is_never_imported(preset, monkeypatch):
    def edit(data):
        data["module"] = "os"
        data["class_name"] = "system"
        data["registered_name"] = "os>system"

    edit_config(preset, edit)
    with pytest.raises(PresetError, match=r"'os>system'.*not a keras_nlp"):
        Backbone.from_preset(str(preset))


def test_serialized_objects_in_arguments_are_refused(preset):
    def edit(data):
        data["config"]["layer_norm_epsilon"] = {
            "module": "builtins",
            "class_name": "eval",
            "config": {"source": "__import__('os').system('true')"},
            "registered_name": None,
        }

    edit_config(preset, edit)
    with pytest.raises(
        PresetError,
        match=r"config\.layer_norm_epsilon is a serialized object \('eval'\)",
    ):
        Backbone.from_preset(str(preset))


def test_dtype_must_be_a_plain_policy(preset):
    def edit(data):
        data["config"]["dtype"] = {
            "module": "somewhere",
            "class_name": "Evil",
            "config": {},
        }

    edit_config(preset, edit)
    with pytest.raises(
        PresetError, match=r"config\.dtype must be a dtype name"
    ):
        Backbone.from_preset(str(preset))


def test_unknown_argument(preset):
    edit_config(preset, lambda d: d["config"].update(num_experts=4))
    with pytest.raises(
        PresetError,
        match=r"GemmaBackbone has no argument\(s\) \['num_experts'\]\. Its "
        r"arguments are: vocabulary_size",
    ):
        Backbone.from_preset(str(preset))


def test_preset_of_another_class(preset):
    with pytest.raises(
        ValueError,
        match=r"holds a GemmaBackbone, not a LlamaBackbone\. Load it with "
        r"GemmaBackbone\.from_preset",
    ):
        LlamaBackbone.from_preset(str(preset))


@pytest.mark.parametrize(
    "preset, message",
    [
        (
            "{tmp}/nowhere",
            "The preset directory '{tmp}/nowhere' does not exist. The "
            "nearest directory that exists is '{tmp}'.",
        ),
        (
            "{tmp}/typo/gemma",
            "The preset directory '{tmp}/typo/gemma' does not exist. The "
            "nearest directory that exists is '{tmp}'.",
        ),
        (
            "~/keras_nlp_no_such_preset",
            "A leading '~' is not expanded here; pass os.path.expanduser(",
        ),
        (
            "{tmp}/config.json",
            "'{tmp}/config.json' is a file, not a preset directory. Pass the "
            "directory that holds config.json and the weights, e.g. '{tmp}'.",
        ),
        # A name with a preset file's ending is read as a path.
        ("model.weights.h5", "'model.weights.h5' does not exist."),
    ],
)
def test_path_that_is_no_directory_is_named(tmp_path, preset, message):
    (tmp_path / "config.json").write_text("{}")
    preset = preset.format(tmp=tmp_path)
    with pytest.raises(PresetError) as info:
        Backbone.from_preset(preset)
    assert message.format(tmp=tmp_path) in str(info.value)
    # The path's problem, not the list of every built-in preset.
    assert "gemma_2b_en" not in str(info.value)


def test_config_that_does_not_match_the_weights(preset):
    # One more layer than the weights have, and a wider hidden size.
    edit_config(preset, lambda d: d["config"].update(num_layers=3))
    with pytest.raises(PresetError) as info:
        Backbone.from_preset(str(preset))
    message = str(info.value)
    assert "do not match the GemmaBackbone built from its config" in message
    assert "nothing was loaded" in message
    assert (
        "decoder_block_2/attention/query/kernel: not in the preset's weights "
        "(expected shape (4, 32, 8), dtype float32)" in message
    )


@pytest.mark.parametrize(
    "stored, problem",
    [
        (
            np.zeros((2, 32, 8), "float32"),
            "has shape (2, 32, 8), expected (1, 32, 8)",
        ),
        (
            np.zeros((1, 32, 8), "int32"),
            "has dtype int32, expected float32 (or another floating dtype)",
        ),
    ],
    ids=["shape", "dtype"],
)
def test_weight_with_the_wrong_shape_or_dtype(preset, stored, problem):
    with h5py.File(preset / "model.weights.h5", "a") as h5:
        del h5[KEY_KERNEL]
        h5[KEY_KERNEL] = stored
    with pytest.raises(PresetError) as info:
        Backbone.from_preset(str(preset))
    assert (
        f"decoder_block_0/attention/key/kernel: model.weights.h5:{KEY_KERNEL} "
        f"{problem}"
    ) in str(info.value)


def test_extra_weight_in_the_file(preset):
    with h5py.File(preset / "model.weights.h5", "a") as h5:
        h5["layers/gemma_decoder_block/attention/key_dense/vars/1"] = np.zeros(
            (8,), "float32"
        )
    with pytest.raises(PresetError) as info:
        Backbone.from_preset(str(preset))
    assert (
        "model.weights.h5:layers/gemma_decoder_block/attention/key_dense/"
        "vars/1 (layer path 'decoder_block_0/attention/key', slot 1, "
        "shape (8,)): the model has no such weight"
    ) in str(info.value)


def test_truncated_file(preset):
    path = preset / "model.weights.h5"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(
        PresetError, match=r"model\.weights\.h5.*(truncated|corrupt)"
    ):
        Backbone.from_preset(str(preset))


def test_missing_shard_file(tmp_path):
    backbone_cls, config = tiny("GemmaBackbone")
    backbone_cls(**config).save_to_preset(str(tmp_path), max_shard_size=0.00001)
    os.remove(tmp_path / "model_00001.weights.h5")
    with pytest.raises(
        PresetError,
        match=r"weights are incomplete: .*model_00001\.weights\.h5 does not "
        r"exist \(listed in model\.weights\.json\)",
    ):
        Backbone.from_preset(str(tmp_path))


def test_shard_index_cannot_point_outside_the_preset(tmp_path):
    backbone_cls, config = tiny("GemmaBackbone")
    backbone_cls(**config).save_to_preset(str(tmp_path), max_shard_size=0.00001)
    index = json.loads((tmp_path / "model.weights.json").read_text())
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = "../elsewhere.weights.h5"
    (tmp_path / "model.weights.json").write_text(json.dumps(index))
    with pytest.raises(
        PresetError, match=r"plain file names inside the preset"
    ):
        Backbone.from_preset(str(tmp_path))


def test_built_in_preset_needs_load_weights_false():
    with pytest.raises(ValueError, match=r"config only.*load_weights=False"):
        GemmaBackbone.from_preset("gemma_2b_en")


@pytest.mark.parametrize("size", [0, -1, "10", True])
def test_bad_max_shard_size(size, tmp_path):
    backbone_cls, config = tiny("GemmaBackbone")
    with pytest.raises(
        ValueError,
        match=rf"max_shard_size must be a positive number of GB\. "
        rf"Received: max_shard_size={size!r}",
    ):
        backbone_cls(**config).save_to_preset(
            str(tmp_path), max_shard_size=size
        )


def test_save_to_a_file_path(tmp_path):
    target = tmp_path / "a_file"
    target.write_text("")
    backbone_cls, config = tiny("GemmaBackbone")
    with pytest.raises(
        ValueError, match=r"needs a directory; .*a_file.* is a file"
    ):
        backbone_cls(**config).save_to_preset(str(target))
