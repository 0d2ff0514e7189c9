"""The zoo: every enrolled (class, tiny config) built once per worker.

Tests in any module that need a tiny config's model take it from here, so
that a worker builds each model, and compiles its forward pass, once.
`tests/conftest.py` groups the tests parametrized with a class onto one
worker (`--dist loadgroup`), so each model is built on one worker only.

- `reference(name, config_name)`: the unsharded model with random weights
  (constant-initialized ones too), its inputs and its jitted outputs.
- `sharded(name, config_name, mesh_shape)`: the reference's weights built
  under a `ModelParallel` distribution for the class's layout map.
- `quantized(name, config_name)`: the reference quantized (unsharded) in
  the class's mode of `QUANTIZED_MODES`, and its outputs.
"""

import dataclasses
import functools
import math

import keras
import numpy as np

from keras_nlp.models import Backbone
from keras_nlp.saving.weight_transfer import build_from_weights
from keras_nlp.saving.weight_transfer import device_value
from keras_nlp.saving.weight_transfer import numpy_dtype
from tests.models.backbone_checks import jit_forward
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import weights_by_path
from tests.models.tiny_configs import TINY_CONFIGS
from tests.models.tiny_configs import tiny


@dataclasses.dataclass
class Reference:
    """An unsharded backbone with random weights, its inputs and outputs."""

    backbone_cls: type
    config: dict
    backbone: Backbone
    weights: dict
    inputs: dict
    outputs: dict


def reference(name, config_name="tiny"):
    """The class's model for `config_name`, built once per worker."""
    # One cache key however the default is passed: a second entry would
    # build another model with other random weights.
    return _reference(name, config_name)


@functools.cache
def _reference(name, config_name):
    backbone_cls, config = tiny(name, config_name)
    backbone = backbone_cls(**config)
    # Constant-initialized weights (norm scales, biases) get random values
    # too, so that a swapped or dropped one changes the outputs.
    rng = np.random.default_rng(0)
    for variable in backbone.weights:
        value = keras.ops.convert_to_numpy(variable.value)
        if np.all(value == value.flat[0]):
            variable.assign(
                rng.normal(0.0, 0.5, value.shape).astype(value.dtype)
            )
    inputs = TINY_CONFIGS[name].inputs_for(backbone, config)
    return Reference(
        backbone_cls,
        config,
        backbone,
        weights_by_path(backbone),
        inputs,
        jit_forward(backbone, inputs),
    )


def distribution_for(
    backbone_cls, mesh_shape, sequence_parallel="auto", axis_names=None
):
    """`ModelParallel` with the class's map on a `(batch, model)` mesh of
    `mesh_shape`, or on axes named `axis_names` (`data` and `fsdp` then
    take the FSDP roles and split the batch, with `batch` if named)."""
    if axis_names is None:
        return keras.distribution.ModelParallel(
            layout_map=backbone_cls.get_layout_map(
                make_mesh(mesh_shape), sequence_parallel=sequence_parallel
            ),
            batch_dim_name="batch",
        )
    from keras_nlp.distribution import ModelParallel

    devices = keras.distribution.list_devices()[: math.prod(mesh_shape)]
    mesh = keras.distribution.DeviceMesh(mesh_shape, axis_names, devices)
    roles = {}
    if "fsdp" in axis_names:
        roles = dict(data_parallel_dim_name="data", fsdp_dim_name="fsdp")
    batch = tuple(a for a in ("batch", "data", "fsdp") if a in axis_names)
    return ModelParallel(
        layout_map=backbone_cls.get_layout_map(
            mesh, sequence_parallel=sequence_parallel, **roles
        ),
        batch_dim_name=batch,
    )


@functools.cache
def sharded(
    name, config_name, mesh_shape, sequence_parallel="auto", axis_names=None
):
    """`(backbone, distribution)`: the reference's weights on a mesh.

    Built as presets load (`build_from_weights`): each variable is created
    from the reference's value, straight into its shards, with no random
    initialization (which compiles a program per sharded variable). The
    LoRA test builds each class from its initializers under a mesh.
    """
    ref = reference(name, config_name)
    distribution = distribution_for(
        ref.backbone_cls, mesh_shape, sequence_parallel, axis_names
    )
    with distribution.scope():
        backbone = build_with_weights(
            ref.backbone_cls, ref.config, ref.backbone.weights
        )
    return backbone, distribution


class _Stored:
    def __init__(self, value):
        self.value = value
        self.dtype = keras.backend.standardize_dtype(value.dtype)

    def describe(self):
        return f"the zoo's {self.dtype} value {self.value.shape}"


def build_with_weights(backbone_cls, config, weights):
    """`backbone_cls(**config)` holding the values of `weights` (another
    backbone's weights or arrays, in order), under the active distribution,
    each cast to its new variable's dtype (a bfloat16 build of float32
    weights rounds them, without the warning a preset would give)."""
    values = [
        keras.ops.convert_to_numpy(getattr(w, "value", w)) for w in weights
    ]

    def pair(model):
        return [
            (variable, _Stored(value.astype(numpy_dtype(variable.dtype))))
            for variable, value in zip(model.weights, values, strict=True)
        ]

    def read(variable, stored):
        return device_value(variable, lambda index: stored.value[index])

    return build_from_weights(
        backbone_cls, config, "the zoo", pair, read, verbose=False
    )


# Each class is quantized in one mode, int8 or int4, alternating by class
# so that each kind of model meets both across the table: the first
# enrolled classes in sorted order, then each newer class in turn, so that
# enrolling a class does not switch the others' modes.
_NEWER_CLASSES = [
    "SmolLM3Backbone",
    "Llama4Backbone",
    "DeepSeekV3Backbone",
    "T5GemmaBackbone",
    "T5Gemma2Backbone",
    "Gemma4Backbone",
    "Qwen3_5Backbone",
    "Qwen3_5MoeBackbone",
]
QUANTIZED_MODES = {
    name: ("int8", "int4")[index % 2]
    for index, name in enumerate(
        sorted(set(TINY_CONFIGS) - set(_NEWER_CLASSES)) + _NEWER_CLASSES
    )
}


def _quantized_value(variable, value, grouped, rng):
    """A random value for a quantized variable, of its dtype and of sizes
    that keep the dequantized weights near the float ones (~0.03)."""
    shape, name = tuple(variable.shape), variable.name
    if name == "g_idx":
        return value  # the row -> group map Keras builds
    if variable.dtype == "int8":  # kernels (int4: two a byte), zeros
        bound = 3 if name.endswith("_zero") else 8
        return rng.integers(-bound, bound, shape).astype("int8")
    if name.endswith("_zero"):
        return rng.integers(-3, 3, shape).astype(value.dtype)
    # Per-channel scales divide the integers (weight = q / scale);
    # grouped int4 scales multiply them (weight = (q - zero) * scale).
    low, high = (0.002, 0.006) if grouped else (150.0, 450.0)
    return rng.uniform(low, high, shape).astype(value.dtype)


@functools.cache
def quantized(name, config_name):
    """`(backbone, outputs)`: the class's tiny config quantized unsharded
    in `QUANTIZED_MODES[name]`, and its jitted outputs.

    Built from `quantized_config` (what `quantize` would make) rather
    than by `quantize` (which runs op by op, seconds per model): the
    reference's float weights, random integers and scales for the rest.
    """
    from keras_nlp.distribution import quantized_config

    ref = reference(name, config_name)
    config = quantized_config(
        ref.backbone_cls, ref.config, QUANTIZED_MODES[name]
    )
    backbone = ref.backbone_cls.from_config(config)
    rng = np.random.default_rng(1)
    paths = {v.path for v in backbone.weights}
    for variable in backbone.weights:
        value = keras.ops.convert_to_numpy(variable.value)
        float_value = ref.weights.get(variable.path)
        if (
            float_value is not None
            and float_value.shape == value.shape
            and variable.dtype != "int8"
        ):
            value = float_value
        else:
            layer = variable.path.rpartition("/")[0]
            grouped = any(
                p.startswith(layer) and p.endswith("_zero") for p in paths
            )
            value = _quantized_value(variable, value, grouped, rng)
        variable.assign(value)
    return backbone, jit_forward(backbone, ref.inputs)
