"""Checkpoints whose real field values keras-hub's backbones cannot express.

Pythia's exact GELU and separate `embed_out`, Phi-3 mini 4k's sliding
window and BERT's exact GELU load into keyword-only options of our
backbones that keras-hub lacks, so keras-hub is no oracle for them. The
checkpoint is written from a random keras-hub backbone (the tensors it
does hold, with `transformers`' names) with the real field values patched
into `config.json` and any tensor keras-hub has no variable for added. The
expected model is our backbone built with the matching options, its
weights copied from the keras-hub model by variable path (the extra
tensors by hand), so it owes nothing to the loader. Per case:

- the checkpoint loads with those options: every weight and the outputs
  equal the expected model's (and the outputs differ from keras-hub's
  model, so the option is what the check sees);
- the same into the shards of one mesh;
- ours -> `save_to_preset(format="huggingface")` -> ours is bit-identical,
  the export holds every written tensor bit for bit and writes the real
  field values back.

The families' tests add an independent NumPy check of what the option
computes (the erf GELU, the window's reach).
"""

import dataclasses
import json
import math
import re

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from keras_nlp.models import Backbone
from keras_nlp.saving.registry import registered_backbones
from tests.models.backbone_checks import make_mesh
from tests.saving.huggingface_checkpoints import _without_auto_suffixes
from tests.saving.huggingface_checkpoints import assert_same_weights
from tests.saving.huggingface_checkpoints import real_outputs
from tests.saving.huggingface_checkpoints import write_checkpoint


@dataclasses.dataclass(frozen=True)
class Written:
    """A written checkpoint and what it must load as."""

    path: object
    options: dict
    fields: dict
    expected: object
    inputs: dict
    outputs: object
    oracle_outputs: object
    compared: object


def write_with_fields(case, path, fields, extra_tensors=None):
    """Writes `case`'s checkpoint with `fields` patched into `config.json`
    and `extra_tensors(oracle)` added; returns the keras-hub model."""
    oracle = write_checkpoint(case, path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, **fields}))
    if extra_tensors is not None:
        tensors = load_file(str(path / "model.safetensors"))
        tensors.update(extra_tensors(oracle))
        save_file(tensors, str(path / "model.safetensors"))
    return oracle


def copy_weights(ours, oracle, extra=None):
    """Assigns the keras-hub `oracle`'s weights to ours by variable path;
    `extra` maps our paths keras-hub has no variable for to values."""
    theirs = _without_auto_suffixes(oracle)
    taken = {key: 0 for key in theirs}
    for variable in ours.weights:
        if extra and variable.path in extra:
            variable.assign(extra[variable.path])
            continue
        key = re.sub(r"_\d+(?=/|$)", "", variable.path)
        variable.assign(theirs[key][taken[key]])
        taken[key] += 1
    return ours


def written_checkpoint(
    tmp_path_factory,
    case,
    options,
    fields,
    inputs,
    extra_tensors=None,
    extra_weights=None,
    compared=real_outputs,
):
    """The `Written` checkpoint of `case` with our `options` and Hugging
    Face's `fields`; `extra_weights(tensors)` gives our values of the extra
    tensors by our variable path."""
    path = tmp_path_factory.mktemp(case.name)
    oracle = write_with_fields(case, path, fields, extra_tensors)
    extra = None
    if extra_weights is not None:
        extra = extra_weights(load_file(str(path / "model.safetensors")))
    cls = registered_backbones()[case.backbone]
    expected = copy_weights(cls(**case.config, **options), oracle, extra)
    outputs = compared(inputs, expected(inputs))
    return Written(
        path=path,
        options=options,
        fields=fields,
        expected=expected,
        inputs=inputs,
        outputs=outputs,
        oracle_outputs=compared(inputs, oracle(inputs)),
        compared=compared,
    )


def erf_gelu(x):
    """The exact GELU, `x * Phi(x)`, in NumPy."""
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def tanh_gelu(x):
    """The tanh-approximated GELU, in NumPy."""
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)
    return 0.5 * x * (1.0 + np.tanh(inner))


def assert_feedforward_is_erf_gelu(block, feedforward):
    """`feedforward(x)` of `block` (intermediate dense, activation, output
    dense) equals NumPy's with the exact GELU, and not with the tanh one."""
    rng = np.random.default_rng(3)
    width = block.intermediate_dense.kernel.shape[0]
    x = rng.normal(0.0, 2.0, (2, 5, width)).astype("float32")

    def numpy(name):
        return keras.ops.convert_to_numpy(name)

    first, second = block.intermediate_dense, block.output_dense
    pre = x @ numpy(first.kernel) + numpy(first.bias)

    def through(activation):
        return activation(pre) @ numpy(second.kernel) + numpy(second.bias)

    actual = keras.ops.convert_to_numpy(feedforward(x))
    np.testing.assert_allclose(actual, through(erf_gelu), atol=1e-5)
    assert np.abs(actual - through(tanh_gelu)).max() > 1e-4


def assert_round_trip(ours, written_path, export_dir, every_tensor=True):
    """Exports `ours` to `export_dir` and loads it back: same config and
    weights, every tensor the checkpoint at `written_path` has written
    back bit for bit (and no other, with `every_tensor`). Returns the
    exported `config.json` fields."""
    ours.save_to_preset(str(export_dir), format="huggingface")
    again = Backbone.from_preset(str(export_dir))
    config = {k: v for k, v in ours.get_config().items() if k != "name"}
    assert {k: again.get_config()[k] for k in config} == config
    assert_same_weights(again, ours)
    exported = load_file(str(export_dir / "model.safetensors"))
    tensors = load_file(str(written_path / "model.safetensors"))
    if every_tensor:
        assert sorted(exported) == sorted(tensors)
    for name in set(exported) & set(tensors):
        np.testing.assert_array_equal(
            exported[name], tensors[name], err_msg=name
        )
    return json.loads((export_dir / "config.json").read_text())


class OptionCheckpointTests:
    """Subclass with a class-scoped fixture `written` -> `Written`."""

    mesh_shape = (2, 4)
    atol = 1e-5
    # Whether the export has every tensor the written checkpoint has (not
    # so for one with pretraining heads or old LayerNorm names).
    exports_every_tensor = True

    def test_loads_with_the_options(self, written):
        ours = Backbone.from_preset(str(written.path))
        config = ours.get_config()
        assert {k: config[k] for k in written.options} == written.options
        assert type(ours) is type(written.expected)
        assert_same_weights(ours, written.expected)
        actual = written.compared(written.inputs, ours(written.inputs))
        np.testing.assert_allclose(
            actual, written.outputs, atol=self.atol, rtol=self.atol
        )
        # The option changes the outputs: keras-hub's model differs.
        difference = np.abs(actual - written.oracle_outputs).max()
        assert difference > 3 * self.atol

    @pytest.mark.multi_device
    def test_loads_into_shards(self, written):
        cls = type(written.expected)
        distribution = keras.distribution.ModelParallel(
            layout_map=cls.get_layout_map(make_mesh(self.mesh_shape)),
            batch_dim_name="batch",
        )
        with distribution.scope():
            ours = Backbone.from_preset(str(written.path))
            actual = written.compared(written.inputs, ours(written.inputs))
        np.testing.assert_allclose(
            actual, written.outputs, atol=self.atol, rtol=self.atol
        )

    def test_round_trip_is_bit_identical(self, written, tmp_path):
        ours = Backbone.from_preset(str(written.path))
        fields = assert_round_trip(
            ours, written.path, tmp_path, self.exports_every_tensor
        )
        assert {k: fields[k] for k in written.fields} == written.fields
