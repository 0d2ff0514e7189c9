"""Tiny Hugging Face checkpoints and the oracle checks every family runs.

A family's tests are one subclass of `HuggingFaceFamilyTests` whose `cases`
list `HFCase`s (see `tests/saving/test_huggingface_families.py`). For each
case a tiny keras-hub backbone with random weights is written as a Hugging
Face checkpoint (by keras-hub's exporter, or by `tensor_writer` following
keras-hub's converter's tensor names), once per class; keras-hub's own
Hugging Face loader reads it back as the oracle. Then:

- ours loads it: every weight equals keras-hub's, outputs within `atol`;
- ours loads it into the shards of each mesh of `meshes`, same outputs,
  every variable placed as the layout plan says;
- ours -> `save_to_preset(format="huggingface")` -> ours is bit-identical,
  and keras-hub loads our export with the same outputs; the exported
  `config.json` has the token ids (in the vocabulary, else null) and the
  RoPE fields and `max_position_embeddings` as the checkpoint had them
  (`assert_exported_fields`).

`tests/saving/conftest.py` parametrizes `case` (and `mesh_shape`) from the
class attributes.
"""

import dataclasses
import inspect
import json
import re

import keras
import numpy as np
import pytest

from keras_nlp.models import Backbone
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import random_inputs

# Every family's weights are loaded into the shards of both; `meshes` (a
# class attribute) says where the outputs are compared too.
ALL_MESHES = ((1, 8), (2, 4))


@dataclasses.dataclass(frozen=True)
class HFCase:
    """One tiny checkpoint of a family.

    Attributes:
        name: the test id.
        backbone: the name of our class that `Backbone.from_preset` builds;
            keras-hub's class of that name writes the checkpoint unless
            `keras_hub_backbone` names another.
        config: constructor arguments of the keras-hub class (tiny).
        keras_hub_backbone: keras-hub's class name, if not `backbone`.
        writer: `(keras-hub backbone, directory) -> None` writing the
            checkpoint; default: keras-hub's exporter.
        config_patch: fields to set in the written `config.json` (e.g. ones
            keras-hub's exporter omits but its loader requires).
        atol: output tolerance (fp32).
        inputs: `(vocabulary_size) -> input dict`, for backbones that take
            other inputs (segment ids, an encoder-decoder's); default:
            `random_inputs(vocabulary_size, length=10)`.
        outputs: `(inputs, outputs) -> array` compared between models;
            default: `real_outputs`.
        ours_only: paths (auto suffixes dropped) of our variables that
            keras-hub's backbone lacks (a kept pooler), left out of the
            comparison with its weights.
        theirs_as_ours: optional `(keras-hub backbone) -> {our path:
            [values]}`, keras-hub's weights named and shaped as ours where
            its paths or shapes differ (SmolLM3).
    """

    name: str
    backbone: str
    config: dict
    keras_hub_backbone: str = None
    writer: object = None
    config_patch: dict = None
    atol: float = 1e-5
    inputs: object = None
    outputs: object = None
    ours_only: tuple = ()
    theirs_as_ours: object = None

    def __str__(self):
        return self.name


def with_defaults(cls, config):
    """`config` and the default of every constructor argument it leaves
    out, as `get_config` has them (without building the model)."""
    defaults = {}
    for klass in reversed(cls.__mro__):
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for name, parameter in inspect.signature(init).parameters.items():
            if parameter.default is not parameter.empty:
                defaults[name] = parameter.default
    return {**defaults, **config}


def randomize(backbone, seed=0):
    """Random weights everywhere (norm scales and biases too), each value
    exactly representable in float16, so a loader that casts through
    float16 (keras-hub's Mistral) stays exact."""
    rng = np.random.default_rng(seed)
    for variable in backbone.weights:
        value = rng.normal(0.0, 0.2, variable.shape).astype("float16")
        variable.assign(value.astype(variable.dtype))
    return backbone


def export_writer(oracle, path):
    """keras-hub's exporter, with the output projection (tied or not)."""
    from keras_hub.src.utils.transformers.export.hf_exporter import (
        export_backbone,
    )

    export_backbone(oracle, str(path), include_lm_head=True)


def tensor_writer(hf_config, tensors):
    """A writer for families keras-hub cannot export.

    Args:
        hf_config: `(keras-hub backbone) -> config.json dict`.
        tensors: `(keras-hub backbone) -> {Hugging Face name: array}`,
            named as keras-hub's converter reads them.
    """

    def write(oracle, path):
        from safetensors.numpy import save_file

        values = {
            name: np.ascontiguousarray(keras.ops.convert_to_numpy(value))
            for name, value in tensors(oracle).items()
        }
        save_file(values, str(path / "model.safetensors"))
        (path / "config.json").write_text(json.dumps(hf_config(oracle)))

    return write


def write_checkpoint(case, path, seed=0):
    """Writes `case`'s checkpoint into `path`; returns the keras-hub model
    it was written from."""
    import keras_hub

    cls = getattr(keras_hub.models, case.keras_hub_backbone or case.backbone)
    oracle = randomize(cls(**case.config), seed)
    (case.writer or export_writer)(oracle, path)
    if case.config_patch:
        config = json.loads((path / "config.json").read_text())
        config.update(case.config_patch)
        (path / "config.json").write_text(json.dumps(config))
    return oracle


def _without_auto_suffixes(model):
    grouped = {}
    for variable in model.weights:
        key = re.sub(r"_\d+(?=/|$)", "", variable.path)
        grouped.setdefault(key, []).append(keras.ops.convert_to_numpy(variable))
    return grouped


def assert_same_weights(
    ours, theirs, exact=True, ours_only=(), theirs_as_ours=None
):
    mine = _without_auto_suffixes(ours)
    expected = (theirs_as_ours or _without_auto_suffixes)(theirs)
    for path in ours_only:
        del mine[path]
    assert sorted(mine) == sorted(expected)
    for path, values in mine.items():
        for value, other in zip(values, expected[path], strict=True):
            np.testing.assert_array_equal(value, other, err_msg=path)


def real_outputs(inputs, outputs):
    """The sequence output at the real (unpadded) tokens."""
    sequence = output_arrays(outputs)["sequence_output"]
    return sequence[np.asarray(inputs["padding_mask"]).astype(bool)]


def _compared(case, inputs, outputs):
    return (case.outputs or real_outputs)(inputs, outputs)


def assert_real_outputs_close(case, inputs, model, expected):
    """`model`'s sequence output at the real tokens is `expected`, within
    the case's tolerance."""
    np.testing.assert_allclose(
        real_outputs(inputs, model(inputs)),
        expected,
        atol=case.atol,
        rtol=case.atol,
    )


def write_directory(path, tensors, config):
    """A checkpoint directory at `path`: `tensors` in `model.safetensors`
    beside `config` as `config.json`."""
    from safetensors.numpy import save_file

    path.mkdir()
    save_file(tensors, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(config))


def exported_config(backbone, path):
    """`backbone` saved in Hugging Face format at `path`; its config.json."""
    backbone.save_to_preset(str(path), format="huggingface")
    return json.loads((path / "config.json").read_text())


# What an export writes back as read (`keras_nlp.saving.huggingface.export`).
_AS_READ = (
    "rope_theta",
    "rope_scaling",
    "rope_parameters",
    "rope_local_base_freq",
    "max_position_embeddings",
)


def assert_exported_fields(written, exported, vocabulary_size):
    """The exported `config.json` fields against the written ones: each
    token id present, the written one where it is in the vocabulary and
    null otherwise (no class default outside it); RoPE fields and
    `max_position_embeddings` as written (nested `text_config` too)."""
    for field in ("bos_token_id", "eos_token_id", "pad_token_id"):
        assert field in exported, field
        value, read = exported[field], written.get(field)
        ids = value if isinstance(value, list) else [value]
        assert all(i is None or 0 <= i < vocabulary_size for i in ids), field
        if read is None:
            continue
        kept = [
            i
            for i in (read if isinstance(read, list) else [read])
            if 0 <= i < vocabulary_size
        ]
        if isinstance(read, list):
            assert value == (kept or None), field
        else:
            assert value == (read if kept else None), field
    for key in _AS_READ:
        if key in written:
            assert exported.get(key) == written[key], key
    if isinstance(written.get("text_config"), dict):
        for key in _AS_READ:
            if key in written["text_config"]:
                assert (
                    exported["text_config"].get(key)
                    == written["text_config"][key]
                ), key


def assert_follows_plan(ours):
    """Every variable of `ours` is sharded as its layout plan says."""
    planned = {w.path: w.spec for w in ours.layout_plan.weights}
    for variable in ours.weights:
        spec = tuple(variable.value.sharding.spec)
        spec += (None,) * (len(variable.shape) - len(spec))
        assert spec == planned[variable.path], variable.path


class HuggingFaceFamilyTests:
    """The oracle checks; subclass with `cases = [HFCase(...), ...]`."""

    cases = []
    meshes = ALL_MESHES

    @pytest.fixture(scope="class")
    @classmethod
    def checkpoint(cls, case, tmp_path_factory):
        import keras_hub

        path = tmp_path_factory.mktemp(case.name)
        write_checkpoint(case, path)
        theirs = keras_hub.models.Backbone.from_preset(str(path))
        vocabulary_size = case.config["vocabulary_size"]
        if case.inputs is None:
            inputs = random_inputs(vocabulary_size, length=10)
        else:
            inputs = case.inputs(vocabulary_size)
        expected = _compared(case, inputs, theirs(inputs))
        return path, theirs, inputs, expected

    def test_loads_like_keras_hub(self, case, checkpoint):
        path, theirs, inputs, expected = checkpoint
        ours = Backbone.from_preset(str(path))
        assert type(ours).__name__ == case.backbone
        assert_same_weights(
            ours,
            theirs,
            ours_only=case.ours_only,
            theirs_as_ours=case.theirs_as_ours,
        )
        np.testing.assert_allclose(
            _compared(case, inputs, ours(inputs)),
            expected,
            atol=case.atol,
            rtol=case.atol,
        )

    @pytest.mark.multi_device
    def test_loads_into_shards(self, case, checkpoint, mesh_shape):
        path, _, inputs, expected = checkpoint
        cls = type(Backbone.from_preset(str(path), load_weights=False))
        distribution = keras.distribution.ModelParallel(
            layout_map=cls.get_layout_map(make_mesh(mesh_shape)),
            batch_dim_name="batch",
        )
        with distribution.scope():
            ours = Backbone.from_preset(str(path))
            actual = _compared(case, inputs, ours(inputs))
        np.testing.assert_allclose(
            actual, expected, atol=case.atol, rtol=case.atol
        )
        assert_follows_plan(ours)

    @pytest.mark.multi_device
    def test_every_mesh_reads_its_shards(self, case, checkpoint):
        # Each device reads its own box of each tensor (fused ones cut per
        # head): on both meshes every gathered weight equals keras-hub's
        # and sits where the plan says. The outputs are compared on
        # `meshes` only (compiling costs more than loading).
        path, theirs, _, _ = checkpoint
        cls = type(Backbone.from_preset(str(path), load_weights=False))
        for mesh_shape in ALL_MESHES:
            distribution = keras.distribution.ModelParallel(
                layout_map=cls.get_layout_map(make_mesh(mesh_shape)),
                batch_dim_name="batch",
            )
            with distribution.scope():
                ours = Backbone.from_preset(str(path))
            assert_same_weights(
                ours,
                theirs,
                ours_only=case.ours_only,
                theirs_as_ours=case.theirs_as_ours,
            )
            assert_follows_plan(ours)

    def test_round_trip_is_bit_identical(self, case, checkpoint, tmp_path):
        import keras_hub

        path, _, inputs, expected = checkpoint
        ours = Backbone.from_preset(str(path))
        ours.save_to_preset(str(tmp_path / "hf"), format="huggingface")
        again = Backbone.from_preset(str(tmp_path / "hf"))
        assert type(again) is type(ours)
        assert_same_weights(again, ours)
        assert_exported_fields(
            json.loads((path / "config.json").read_text()),
            json.loads((tmp_path / "hf" / "config.json").read_text()),
            case.config["vocabulary_size"],
        )
        theirs = keras_hub.models.Backbone.from_preset(str(tmp_path / "hf"))
        np.testing.assert_allclose(
            _compared(case, inputs, theirs(inputs)),
            expected,
            atol=case.atol,
            rtol=case.atol,
        )
