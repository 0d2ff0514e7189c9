"""The same weights give the same numbers on TensorFlow as on JAX.

Every backbone class's tiny configs (`tests/models/tiny_configs.py`) get
`assign_unit_scale` weights, which are drawn by variable path and so are
the same on both backends. Their JAX outputs on small inputs are stored by

    python -m tests.oracles jax_outputs

(one file per class, `tests/oracle_data/jax_outputs-<Class>.npz`), and
`test_outputs_equal_the_stored_jax_outputs` compares a fresh build with
them. On TensorFlow it is the cross-backend check, on every tiny config
(eager calls). On JAX, in the main run, it checks each class's `"tiny"`
config: it fails when a model's numbers changed on purpose and the stored
data is stale (an extra config that alone changed fails on TensorFlow,
with the command that rewrites the data).

The other tests run on TensorFlow only, where the code takes TensorFlow's
own paths: presets and Hugging Face checkpoints are written from whole
tensors instead of shard by shard (`host_pieces`) and read whole
(`device_value`) into a backbone built under a `StatelessScope`,
`plan_layout`'s abstract build runs TensorFlow's symbolic shapes, and
bfloat16 runs TensorFlow's CPU kernels. Graph mode (`tf.function`) is
covered by the tests of `tests/models/test_causal_lm.py` marked
`tensorflow_pass`: generation, `fit` and `predict`.

CI runs this module and the other tests marked `tensorflow_pass` again with
`KERAS_BACKEND=tensorflow` (see `.ci/run`).
"""

import json
import pathlib

import keras
import numpy as np
import pytest

import keras_nlp.saving
from keras_nlp.models import Backbone
from keras_nlp.saving.weight_transfer import forget_deferred
from tests import oracles
from tests.models.backbone_checks import assert_close_to_stored
from tests.models.backbone_checks import assert_same_weights
from tests.models.backbone_checks import assign_unit_scale
from tests.models.backbone_checks import jit_forward
from tests.models.tiny_configs import DECODER
from tests.models.tiny_configs import TINY_CONFIGS
from tests.models.tiny_configs import all_tiny_configs
from tests.models.tiny_configs import tiny

pytestmark = pytest.mark.tensorflow_pass

ON_JAX = keras.backend.backend() == "jax"
DATA_PREFIX = "jax_outputs-"
BATCH = 2
# float32 on CPU: the backends' kernels (attention, normalization, GELU)
# sum in other orders. The largest difference seen is 3e-6 (PaliGemma, on
# outputs of size 5).
ATOL = 2e-5
# bfloat16 against the float32 outputs: see `test_bfloat16_on_tensorflow`.
BF16_ATOL = 0.1
# On JAX each config compiles (about a second on 2 cores, without a warm
# compilation cache): the main run checks each class's first config only.
CASES = [case for case in all_tiny_configs() if not ON_JAX or case[1] == "tiny"]
CLASSES = sorted(TINY_CONFIGS)
# Saved as presets and built from them on TensorFlow. The paths taken there
# (whole tensors, a build under a `StatelessScope`) are the same for every
# class; these hold the weights that are laid out unusually: multi-query
# heads, stacked experts, blocks shared across layers, a relative bias
# shared by path (T5), a vision tower.
PRESET_CLASSES = [
    "AlbertBackbone",
    "GemmaBackbone",
    "MixtralBackbone",
    "PaliGemmaBackbone",
    "T5Backbone",
]
# Written and read back as Hugging Face checkpoints: dense GQA, stacked
# experts, an encoder with a pooler.
HUGGINGFACE_CLASSES = ["BertBackbone", "LlamaBackbone", "MixtralBackbone"]

on_tensorflow = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="checks TensorFlow's own code paths",
)


def case_id(case):
    return "-".join(case)


def build(name, config_name="tiny", **kwargs):
    """The class's tiny config with `assign_unit_scale` weights.

    On JAX the variables are created deferred and given their values
    directly: each random initializer would compile for its shape first
    (seconds per model on 2 cores).
    """
    backbone_cls, config = tiny(name, config_name)
    config.update(kwargs)
    if not ON_JAX:
        backbone = backbone_cls(**config)
        assign_unit_scale(backbone)
        return backbone
    with keras.StatelessScope(initialize_variables=False):
        backbone = backbone_cls(**config)
    try:
        assign_unit_scale(backbone)
        # Variables that are not weights (seed states) start as their
        # initializers say.
        for variable in backbone.variables:
            if variable._value is None:
                variable._deferred_initialize()
    finally:
        forget_deferred(backbone)
    return backbone


def generate_oracle_data():
    """The JAX inputs and outputs of every tiny config, one file a class."""
    assert ON_JAX, keras.backend.backend()
    data = {}
    for name, config_name in all_tiny_configs():
        backbone = build(name, config_name)
        config = TINY_CONFIGS[name].configs[config_name]
        inputs = TINY_CONFIGS[name].inputs_for(backbone, config, batch=BATCH)
        arrays = data.setdefault(DATA_PREFIX + name, {})
        for key, value in inputs.items():
            arrays[f"{config_name}/input/{key}"] = np.asarray(value)
        for key, value in jit_forward(backbone, inputs).items():
            arrays[f"{config_name}/output/{key}"] = value
    return data


def stored(name, config_name="tiny"):
    """`(inputs, outputs)` stored for a class's config on JAX."""
    found = {"input": {}, "output": {}}
    for key, value in oracles.load(DATA_PREFIX + name).items():
        config, kind, array = key.split("/")
        if config == config_name:
            found[kind][array] = value
    assert found["output"], (
        f"No stored JAX outputs for {name} {config_name!r}: write them with "
        f"`{oracles.COMMAND} jax_outputs`."
    )
    return found["input"], found["output"]


def assert_equal_to_stored(name, actual, expected, inputs, atol=ATOL):
    """Outputs within `atol` of the stored ones; a decoder's real tokens.

    A decoder's left-padded query attends to no key: its output is
    undefined and differs between the backends' attention kernels. An
    encoder's padded query, and the right-padded decoder side of an
    encoder-decoder, attend to real keys and are compared too.

    Returns:
        The largest absolute difference compared.
    """
    return assert_close_to_stored(
        actual, expected, inputs, atol, TINY_CONFIGS[name].kind == DECODER
    )


# === Numbers: the stored JAX outputs ===


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_outputs_equal_the_stored_jax_outputs(case):
    inputs, expected = stored(*case)
    actual = jit_forward(build(*case), inputs)
    try:
        assert_equal_to_stored(case[0], actual, expected, inputs)
    except AssertionError as error:
        raise AssertionError(
            f"{case_id(case)} on {keras.backend.backend()} differs from its "
            "stored JAX outputs. If it now differs on JAX too, the model's "
            "numbers changed and the data is stale: rewrite it with "
            f"`{oracles.COMMAND} jax_outputs`.\n{error}"
        ) from None


# === TensorFlow's own paths ===


@on_tensorflow
@pytest.mark.parametrize("name", PRESET_CLASSES)
def test_config_plan_and_preset_round_trip(name, tmp_path):
    """The config, the abstract plan and a preset, on TensorFlow.

    `plan_layout` builds under a `StatelessScope`; the preset is written
    in several files from whole tensors and built from them under a
    `StatelessScope`: the same weights, the same outputs as on JAX.
    """
    backbone = build(name)
    config = json.loads(json.dumps(backbone.get_config()))
    assert config == backbone.get_config()
    plan = type(backbone).plan_layout({"batch": 1, "model": 1}, config=config)
    assert [(w.path, tuple(w.shape)) for w in plan.weights] == [
        (v.path, tuple(v.shape)) for v in backbone.weights
    ]
    # About 4 KB a file: the largest tensors get files of their own.
    backbone.save_to_preset(str(tmp_path), max_shard_size=4e-6)
    assert len(list(tmp_path.glob("model_*.weights.h5"))) > 1
    loaded = Backbone.from_preset(str(tmp_path))
    assert type(loaded) is type(backbone)
    assert loaded.get_config() == config
    assert_same_weights(loaded, backbone)
    inputs, expected = stored(name)
    assert_equal_to_stored(name, jit_forward(loaded, inputs), expected, inputs)


@on_tensorflow
@pytest.mark.parametrize("name", HUGGINGFACE_CLASSES)
def test_huggingface_checkpoint_round_trip(name, tmp_path):
    """Exported from whole tensors, loaded under a `StatelessScope`."""
    backbone = build(name)
    backbone.save_to_preset(str(tmp_path), format="huggingface")
    assert (tmp_path / "model.safetensors").exists()
    # `Backbone.from_preset` would take a Llama checkpoint as Llama 3's.
    loaded = type(backbone).from_preset(str(tmp_path))
    assert type(loaded) is type(backbone)
    assert_same_weights(loaded, backbone)


@on_tensorflow
def test_load_weights_into_a_built_backbone(tmp_path):
    """`load_weights` assigns each whole tensor to a built variable."""
    backbone = build("GemmaBackbone")
    backbone.save_to_preset(str(tmp_path))
    other = type(backbone).from_config(backbone.get_config())
    keras_nlp.saving.load_weights(other, str(tmp_path))
    assert_same_weights(other, backbone)


@on_tensorflow
@pytest.mark.parametrize("name", CLASSES)
def test_bfloat16_on_tensorflow(name):
    """bfloat16 weights and outputs on TensorFlow's CPU kernels.

    Near the float32 JAX outputs: they differ by up to 0.05 (on outputs
    of size 5, where one bfloat16 step is 0.03); a dropped or wrong op
    moves them by about 1.
    """
    backbone = build(name, dtype="bfloat16")
    assert {
        keras.backend.standardize_dtype(v.dtype) for v in backbone.weights
    } == {"bfloat16"}
    inputs, expected = stored(name)
    actual = jit_forward(backbone, inputs)
    for value in actual.values():
        assert keras.backend.standardize_dtype(value.dtype) == "bfloat16"
    assert_equal_to_stored(name, actual, expected, inputs, atol=BF16_ATOL)


def test_the_stored_data_holds_every_config_and_nothing_else():
    stored_configs = {}
    for path in oracles.DATA_DIR.glob(f"{DATA_PREFIX}*.npz"):
        name = path.name[len(DATA_PREFIX) : -len(".npz")]
        keys = oracles.load(DATA_PREFIX + name)
        stored_configs[name] = {key.split("/")[0] for key in keys}
    assert stored_configs == {
        name: set(enrolment.configs) for name, enrolment in TINY_CONFIGS.items()
    }, f"Rewrite the data with `{oracles.COMMAND} jax_outputs`."


def test_ci_runs_every_module_with_tests_marked_tensorflow_pass():
    """`.ci/run` names the modules (collecting all of `tests/` on
    TensorFlow would import every module for these few)."""
    root = pathlib.Path(__file__).resolve().parent.parent
    ci = (root / ".ci" / "run").read_text()
    marked = [
        path.relative_to(root).as_posix()
        for path in sorted((root / "tests").rglob("test_*.py"))
        if "mark.tensorflow_pass" in path.read_text()
    ]
    assert "tests/test_tensorflow_backend.py" in marked
    assert [path for path in marked if path not in ci] == []
