"""The checks every enrolled backbone passes, for each of its tiny configs.

Parametrized over `tests/models/tiny_configs.py` (class x tiny config) and
one list of meshes, so that enrolling a class there runs it through all of:

1. paths and shapes equal keras-hub's checkpoints (golden, per preset);
2. config round trip (JSON-serializable, same config, weights, outputs);
3. output shape, and bfloat16 (its first config: a dtype recompiles all);
4. the plan equals every real variable's sharding, on `BUILD_MESHES`
   (a class's extra configs: on the first);
5. the sharded output equals the unsharded one: on `OUTPUT_MESHES`, and
   on the mixed `LORA_MESH` through 6 (a class's first config);
6. LoRA under a mesh (its first config): adapters laid out like their
   kernels, only they train, and the output equals the unsharded one
   while B is zero;
7. preset round trips (its first config): unsharded, and saved on one mesh
   (or none) then loaded on another (or none);
8. for decoders: causality, and padding on the invisible side;
9. quantized (int8 or int4, alternating by class): saved unsharded as a
   preset, loaded straight into shards on (1, 8) and (2, 4), every
   variable (scales, zeros, packed kernels) laid out as planned and the
   outputs equal to the unsharded quantized model's;
10. for decoders: sequence parallelism (the residual stream split over
   the sequence on the model axis) on (1, 8) and (2, 4), and context
   parallelism on (batch, context, model) and four-axis meshes (attention
   in chunks of queries there): outputs and gradients equal to the
   unsharded model's, the split seen while tracing.

Built models come from the zoo (tests/models/zoo.py), built once per
worker: one unsharded reference (its weights, inputs and outputs) per
config, one sharded build per config and mesh.
Each new sharded forward pass compiles (~1 s on 2 cores, see `forward`), so
outputs are compared on two meshes only: the pure model-parallel one (most
fallbacks), and the mixed `LORA_MESH` by the LoRA test, whose adapters
leave the forward pass unchanged; the third build mesh checks layouts.
"""

import collections
import functools
import json
import pathlib

import keras
import numpy as np
import pytest

from keras_nlp.distribution.activations import query_chunk_scope
from keras_nlp.layers.common import TakesLayers
from keras_nlp.models import Backbone
from tests.models.backbone_checks import assert_gradients_close
from tests.models.backbone_checks import assert_outputs_close
from tests.models.backbone_checks import assert_same_weights
from tests.models.backbone_checks import gradients
from tests.models.backbone_checks import jit_forward as forward
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import spec_of
from tests.models.tiny_configs import DECODER
from tests.models.tiny_configs import TINY_CONFIGS
from tests.models.tiny_configs import all_tiny_configs
from tests.models.tiny_configs import backbone_class
from tests.models.zoo import QUANTIZED_MODES
from tests.models.zoo import build_with_weights
from tests.models.zoo import distribution_for
from tests.models.zoo import quantized
from tests.models.zoo import reference
from tests.models.zoo import sharded

# (batch, model) meshes: every build is checked against its plan on each;
# outputs are compared on the first here and on the second by the LoRA
# test (sharded gradients too).
BUILD_MESHES = [(1, 8), (2, 4), (4, 2)]
OUTPUT_MESHES = BUILD_MESHES[:1]
LORA_MESH = BUILD_MESHES[1]
QUANTIZED_MESHES = BUILD_MESHES[:2]
QUANTIZED_TOLERANCE = 0.03
# Save on the first mesh (None: unsharded), load on the second. Presets
# saved from one device load into shards in tests/saving (keras-hub's).
PRESET_MESH_PAIRS = [((1, 8), (2, 4)), ((2, 4), None)]
ATOL = 1e-5

CASES = all_tiny_configs()
# A class's extra configs keep head counts and vocabularies that an 8-way
# model axis doesn't divide: they build there; the mixed meshes are checked
# on each class's first config.
BUILD_CASES = [
    (case, mesh)
    for case in CASES
    for mesh in BUILD_MESHES
    if case[1] == "tiny" or mesh == BUILD_MESHES[0]
]
# Each sharded forward pass compiles anew: every config compares outputs
# on the pure model-parallel mesh, where heads fall back most.
OUTPUT_CASES = [(case, mesh) for case in CASES for mesh in OUTPUT_MESHES]
# Saving, loading and LoRA's layouts do not depend on the shapes: one
# config per class.
PRESET_CASES = [(name, "tiny") for name in sorted(TINY_CONFIGS)]
DECODER_CASES = [c for c in CASES if TINY_CONFIGS[c[0]].kind == DECODER]
# Long context: each decoder class's first config with sequence
# parallelism on (1, 8) and (2, 4), and with a context axis (keys and
# values gathered over it) on (batch, context, model); a dense and a
# mixture-of-experts class on four axes with both. Sequences the axes
# divide (else the sequence stays whole).
LONG_CONTEXT_LENGTH = 16
CONTEXT_MESH = ((2, 2, 2), ("batch", "context", "model"))
FOUR_AXIS_MESHES = {
    "Llama3Backbone": ((1, 2, 2, 2), ("data", "fsdp", "context", "model")),
    "MixtralBackbone": ((1, 2, 2, 2), ("batch", "context", "expert", "model")),
}
LONG_CONTEXT_DECODERS = [
    case
    for case in PRESET_CASES
    if TINY_CONFIGS[case[0]].kind == DECODER
    and backbone_class(case[0]).sequence_splittable
]
# (case, mesh shape, axis names or None for (batch, model), sequence
# parallel). Sequence parallelism alone on (1, 8) or (2, 4), alternating
# by class (each kind of block meets both across the table; a class's
# layers are the same code on either), then every class with a context
# axis.
LONG_CONTEXT_CASES = (
    [
        (case, [(1, 8), (2, 4)][index % 2], None, True)
        for index, case in enumerate(LONG_CONTEXT_DECODERS)
    ]
    + [(case, *CONTEXT_MESH, "auto") for case in LONG_CONTEXT_DECODERS]
    + [((name, "tiny"), *mesh, True) for name, mesh in FOUR_AXIS_MESHES.items()]
)


def long_context_id(row):
    case, mesh, axes, sequence_parallel = row
    names = "x".join(axes) if axes else "batch x model"
    return f"{case_id(case)}-{mesh}-{names}-sp={sequence_parallel}"


GOLDEN = json.loads(
    (
        pathlib.Path(__file__).parent / "golden" / "checkpoint_shapes.json"
    ).read_text()
)["presets"]

multi_device = pytest.mark.multi_device


def case_id(case):
    return "-".join(str(part) for part in case)


def numpy(x):
    return keras.ops.convert_to_numpy(x)


def assert_follows_plan(backbone, mesh_shape):
    """Every variable's sharding is its planned spec, shards sized to it."""
    plan = backbone.layout_plan
    assert plan is not None
    assert plan.mesh.shape == tuple(mesh_shape)
    variables = {v.path: v for v in backbone.weights}
    assert {p: spec_of(v) for p, v in variables.items()} == {
        w.path: w.spec for w in plan.weights
    }
    for weight in plan.weights:
        shard = variables[weight.path].value.addressable_shards[0].data
        assert tuple(shard.shape) == weight.shard_shape, weight.path
    return plan


def real_tokens(inputs):
    return np.asarray(inputs["padding_mask"]).astype(bool)


@pytest.fixture(scope="module")
def presets(tmp_path_factory):
    """Preset directories saved once per config and source mesh."""

    @functools.cache
    def save(name, config_name, mesh_shape):
        path = tmp_path_factory.mktemp(f"{name}_{config_name}_{mesh_shape}")
        if mesh_shape is None:
            reference(name, config_name).backbone.save_to_preset(str(path))
        else:
            backbone, _ = sharded(name, config_name, mesh_shape)
            # Sharded files too: every tensor in a file of its own, or
            # nearly.
            backbone.save_to_preset(str(path), max_shard_size=0.00001)
        return path

    return save


@pytest.fixture(scope="module")
def quantized_presets(tmp_path_factory):
    """The zoo's quantized models saved unsharded, once per config."""

    @functools.cache
    def save(name, config_name):
        path = tmp_path_factory.mktemp(f"{name}_{config_name}_quantized")
        quantized(name, config_name)[0].save_to_preset(str(path))
        return path

    return save


# === Enrolment ===


def test_every_exported_backbone_is_enrolled():
    import keras_nlp.models

    exported = {
        name
        for name in keras_nlp.models.__all__
        if name.endswith("Backbone") and name != "Backbone"
    }
    assert exported == set(TINY_CONFIGS)
    for name, enrolment in TINY_CONFIGS.items():
        assert next(iter(enrolment.configs)) == "tiny", name
        assert enrolment.invisible_padding in ("left", "right"), name


# === 1. Paths and shapes of keras-hub's checkpoints ===


@pytest.mark.parametrize("preset", sorted(GOLDEN))
def test_paths_and_shapes_equal_the_keras_hub_checkpoint(preset):
    golden = GOLDEN[preset]
    backbone_cls = backbone_class(golden["class"])
    if preset in backbone_cls.presets:
        config = dict(backbone_cls.presets[preset])
        # Our preset agrees with keras-hub's on every argument it names.
        assert {k: config.get(k) for k in golden["config"]} == golden["config"]
    else:
        # A config keras-hub has without a preset of ours (e.g. untied).
        config = dict(golden["config"])
    plan = backbone_cls.plan_layout(
        {"batch": 1, "model": 1}, config=dict(config, num_layers=1)
    )
    shapes = {w.path: list(w.shape) for w in plan.weights}
    # No duplicate paths but keras-hub's own (T5's relative biases).
    counts = collections.Counter(w.path for w in plan.weights)
    repeated = {path: n for path, n in counts.items() if n > 1}
    assert repeated == golden.get("repeated_paths", {})
    assert shapes == golden["shapes"]


# === 2-3. Config round trip, output shape and bfloat16 ===


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_config_round_trip(case):
    ref = reference(*case)
    config = ref.backbone.get_config()
    for key, value in ref.config.items():
        assert config[key] == value, key
    for key in ("name", "trainable", "dtype"):
        assert key in config
    # Plain JSON values only: a preset's config.json holds exactly this.
    restored = json.loads(json.dumps(config))
    assert restored == config
    if case[1] != "tiny":
        # The restored config plans the same variables (no allocation).
        plan = ref.backbone_cls.plan_layout(
            {"batch": 1, "model": 1}, config=restored
        )
        assert [(w.path, tuple(w.shape)) for w in plan.weights] == [
            (v.path, tuple(v.shape)) for v in ref.backbone.weights
        ]
        return
    # Blocks and attention layers built from other layers read back their
    # own configs too (standalone, as `keras.saving` stores them).
    for layer in ref.backbone._flatten_layers():
        if isinstance(layer, TakesLayers):
            layer_config = layer.get_config()
            assert type(layer).from_config(layer_config).get_config() == (
                layer_config
            ), layer.path
    # A class's first config is rebuilt for real and gives the same outputs.
    clone = ref.backbone_cls.from_config(restored)
    assert clone.get_config() == config
    assert [(v.path, tuple(v.shape)) for v in clone.weights] == [
        (v.path, tuple(v.shape)) for v in ref.backbone.weights
    ]
    clone.set_weights(ref.backbone.get_weights())
    assert_outputs_close(forward(clone, ref.inputs), ref.outputs, atol=0)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_output_shape(case):
    ref = reference(*case)
    enrolment = TINY_CONFIGS[case[0]]
    batch, length = 8, 12  # the inputs' default shape
    if enrolment.output_shapes is not None:
        expected = enrolment.output_shapes(ref.config, batch, length)
    else:
        hidden_dim = ref.config["hidden_dim"]
        expected = {"sequence_output": (batch, length, hidden_dim)}
        if enrolment.pooled:
            expected["pooled_output"] = (batch, hidden_dim)
    assert {k: v.shape for k, v in ref.outputs.items()} == expected
    # Inferred from the NumPy inputs without running (keras-hub's backbone
    # tests call it so): the real outputs' shapes and dtypes.
    specs = ref.backbone.compute_output_spec(ref.inputs)
    if not isinstance(specs, dict):
        specs = {"sequence_output": specs}
    assert {k: (v.shape, v.dtype) for k, v in specs.items()} == {
        k: (v.shape, str(v.dtype)) for k, v in ref.outputs.items()
    }
    assert set(ref.backbone.input) == set(enrolment.inputs)
    for value in ref.outputs.values():
        assert np.all(np.isfinite(value))


# Each dtype compiles every op again: one config per class.
@pytest.mark.parametrize("name", sorted(TINY_CONFIGS))
def test_bfloat16_weights_and_outputs(name):
    ref = reference(name, "tiny")
    # The reference's weights in bfloat16: Keras's initializers would
    # compile an eager program per shape in bfloat16 (most of the test).
    backbone = build_with_weights(
        ref.backbone_cls,
        dict(ref.config, dtype="bfloat16"),
        ref.backbone.weights,
    )
    assert {
        keras.backend.standardize_dtype(v.dtype) for v in backbone.weights
    } == {"bfloat16"}
    for value in forward(backbone, ref.inputs).values():
        assert keras.backend.standardize_dtype(value.dtype) == "bfloat16"
        assert np.all(np.isfinite(value.astype("float32")))


# === 4-5. Sharded builds follow their plan and give the same outputs ===


@multi_device
@pytest.mark.parametrize(
    "case, mesh_shape",
    BUILD_CASES,
    ids=[f"{case_id(c)}-{m}" for c, m in BUILD_CASES],
)
def test_sharded_build_follows_its_plan(case, mesh_shape):
    backbone, distribution = sharded(*case, mesh_shape)
    plan = assert_follows_plan(backbone, mesh_shape)
    # The plan the class's map bound to is the one the backbone carries.
    assert plan is distribution._layout_map.plan
    assert plan.backbone == case[0]
    assert_same_weights(backbone, reference(*case).weights)


@multi_device
@pytest.mark.parametrize(
    "case, mesh_shape",
    OUTPUT_CASES,
    ids=[f"{case_id(c)}-{m}" for c, m in OUTPUT_CASES],
)
def test_sharded_output_equals_unsharded(case, mesh_shape):
    backbone, distribution = sharded(*case, mesh_shape)
    ref = reference(*case)
    with distribution.scope():
        outputs = forward(backbone, ref.inputs)
    # Same weights; a sharded forward pass only reorders float sums.
    assert_outputs_close(outputs, ref.outputs, atol=ATOL)


@multi_device
@pytest.mark.parametrize("case", PRESET_CASES, ids=case_id)
def test_sharded_gradients_equal_unsharded(case):
    if keras.backend.backend() != "jax":
        pytest.skip("sharding runs on JAX")
    ref = reference(*case)
    expected = gradients(ref.backbone, ref.inputs)
    backbone, distribution = sharded(*case, LORA_MESH)
    with distribution.scope():
        actual = gradients(backbone, ref.inputs)
    assert_gradients_close(actual, expected)


# === 6. LoRA under a mesh ===


@multi_device
@pytest.mark.parametrize("case", PRESET_CASES, ids=case_id)
def test_lora_under_a_mesh(case):
    ref = reference(*case)
    distribution = distribution_for(ref.backbone_cls, LORA_MESH)
    with distribution.scope():
        backbone = ref.backbone_cls(**ref.config)
        backbone.set_weights(ref.backbone.get_weights())
        backbone.enable_lora(4)
    plan = assert_follows_plan(backbone, LORA_MESH)
    adapters = {w.path: w for w in plan.weights if "/lora_kernel_" in w.path}
    assert set(adapters) == {v.path for v in backbone.trainable_weights}
    # Two adapters on every layer of each targeted name, in every block.
    targets = {path.rsplit("/", 1)[0] for path in adapters}
    assert {t.rsplit("/", 1)[1] for t in targets} == set(
        backbone.lora_target_names
    )
    assert len(adapters) == 2 * len(targets)
    assert len(targets) == TINY_CONFIGS[case[0]].distinct_blocks(
        ref.config
    ) * len(backbone.lora_target_names)
    # A (..., rank) shares the kernel's input dims' layout; B (rank, out)
    # its output dim's.
    for target in targets:
        kernel = plan.weight(target + "/kernel").spec
        assert adapters[target + "/lora_kernel_a"].spec == kernel[:-1] + (None,)
        assert adapters[target + "/lora_kernel_b"].spec == (None, kernel[-1])
    variables = {v.path: v for v in backbone.weights}
    for path in adapters:
        if path.endswith("_b"):
            assert not np.any(numpy(variables[path].value)), path
    with distribution.scope():
        outputs = forward(backbone, ref.inputs)
    assert_outputs_close(outputs, ref.outputs, atol=ATOL)


# === 7. Preset round trips ===


@pytest.mark.parametrize("case", PRESET_CASES, ids=case_id)
def test_preset_round_trip(case, presets):
    name, _ = case
    ref = reference(*case)
    path = presets(*case, None)
    assert sorted(p.name for p in path.iterdir()) == [
        "config.json",
        "metadata.json",
        "model.weights.h5",
    ]
    saved = json.loads((path / "config.json").read_text())
    assert saved["registered_name"] == f"keras_nlp>{name}"
    metadata = json.loads((path / "metadata.json").read_text())
    assert metadata["parameter_count"] == ref.backbone.count_params()

    loaded = Backbone.from_preset(str(path))
    assert type(loaded) is ref.backbone_cls
    assert loaded.get_config() == ref.backbone.get_config()
    assert_same_weights(loaded, ref.weights)
    assert_outputs_close(forward(loaded, ref.inputs), ref.outputs, atol=0)
    # Keras's own `load_weights` reads the file by its h5 keys, so the keys
    # are exactly the ones Keras (and keras-hub) write.
    keras_loaded = ref.backbone_cls(**ref.config)
    keras_loaded.load_weights(str(path / "model.weights.h5"))
    assert_same_weights(keras_loaded, ref.weights)


@multi_device
@pytest.mark.parametrize(
    "source_mesh, target_mesh",
    PRESET_MESH_PAIRS,
    ids=[f"{s}->{t}" for s, t in PRESET_MESH_PAIRS],
)
@pytest.mark.parametrize("case", PRESET_CASES, ids=case_id)
def test_preset_saved_on_one_mesh_loads_on_another(
    case, source_mesh, target_mesh, presets
):
    ref = reference(*case)
    path = presets(*case, source_mesh)
    if source_mesh is not None:
        assert (path / "model.weights.json").exists()
    if target_mesh is None:
        loaded = Backbone.from_preset(str(path))
        assert loaded.layout_plan is None
        assert_same_weights(loaded, ref.weights)
        assert_outputs_close(forward(loaded, ref.inputs), ref.outputs, atol=0)
        return
    distribution = distribution_for(Backbone, target_mesh)
    with distribution.scope():
        loaded = Backbone.from_preset(str(path))
    assert type(loaded) is ref.backbone_cls
    # The zoo's weights, laid out as planned: the model whose sharded
    # outputs the LoRA test compares on this mesh (a forward pass here
    # would compile that program again).
    assert target_mesh == LORA_MESH
    assert_follows_plan(loaded, target_mesh)
    assert_same_weights(loaded, ref.weights)


# === 8. Decoders: causality and padding ===


@pytest.mark.parametrize("case", DECODER_CASES, ids=case_id)
def test_a_later_token_does_not_change_earlier_outputs(case):
    ref = reference(*case)
    position = 8
    changed = {k: v.copy() for k, v in ref.inputs.items()}
    changed["token_ids"][:, position] = (
        changed["token_ids"][:, position] % (ref.config["vocabulary_size"] - 1)
    ) + 1
    outputs = forward(ref.backbone, changed)["sequence_output"]
    expected = ref.outputs["sequence_output"]
    # Real tokens only: a padded query attends to no real key, so its
    # output is undefined (some kernels average every value, later ones
    # too).
    earlier = real_tokens(ref.inputs)[:, :position]
    np.testing.assert_allclose(
        outputs[:, :position][earlier],
        expected[:, :position][earlier],
        atol=1e-6,
        rtol=0,
    )
    for row in range(len(outputs)):
        assert not np.allclose(outputs[row, position], expected[row, position])


@pytest.mark.parametrize("case", DECODER_CASES, ids=case_id)
def test_padding_leaves_real_tokens_unchanged(case):
    ref = reference(*case)
    pad = 3
    # Row 1's last tokens with padding on the side that must not show, in
    # a batch of the reference's shape (its compiled ops are reused), and
    # the same tokens with other real tokens after them in row 1.
    tokens = ref.inputs["token_ids"][1, pad:]
    padded = {k: v.copy() for k, v in ref.inputs.items()}
    side = TINY_CONFIGS[case[0]].invisible_padding
    real = slice(pad, None) if side == "left" else slice(None, -pad)
    padded["token_ids"][0] = 0
    padded["token_ids"][0, real] = tokens
    padded["padding_mask"][0] = 0
    padded["padding_mask"][0, real] = 1
    padded["token_ids"][1, : len(tokens)] = tokens
    padded["padding_mask"][1] = 1
    outputs = forward(ref.backbone, padded)["sequence_output"]
    np.testing.assert_allclose(
        outputs[0, real], outputs[1, : len(tokens)], atol=ATOL, rtol=ATOL
    )


# === 9. Quantized presets into shards ===


@multi_device
@pytest.mark.filterwarnings("ignore:Layer .* does not have a `quantize`")
@pytest.mark.parametrize(
    "mesh_shape", QUANTIZED_MESHES, ids=[str(m) for m in QUANTIZED_MESHES]
)
@pytest.mark.parametrize("case", PRESET_CASES, ids=case_id)
def test_quantized_preset_loads_into_shards(
    case, mesh_shape, quantized_presets
):
    mode = QUANTIZED_MODES[case[0]]
    backbone, expected = quantized(*case)
    path = quantized_presets(*case)
    saved = json.loads((path / "config.json").read_text())["config"]
    assert saved["dtype"]["class_name"] == "DTypePolicyMap"
    with distribution_for(Backbone, mesh_shape).scope():
        loaded = Backbone.from_preset(str(path))
        actual = forward(loaded, reference(*case).inputs)
    plan = assert_follows_plan(loaded, mesh_shape)
    assert_same_weights(loaded, backbone)
    # Every layer Keras quantized is planned in its stored dtype, with its
    # scales (int4: packed kernels, zeros and group indices too).
    layers = [
        layer
        for layer in backbone._flatten_layers()
        if getattr(layer, "quantization_mode", None) == mode
    ]
    assert layers
    for weight in plan.weights:
        # (Quantization scales: not a model's own `per_dim_scale`.)
        if weight.path.endswith(
            ("kernel_scale", "embeddings_scale", "_zero", "g_idx")
        ):
            assert f"{mode} " in weight.reason, weight.path
    int8 = [w for w in plan.weights if w.dtype == "int8"]
    assert len(int8) >= len(layers)
    # Random integers and scales sized like real ones: finite, not flat.
    for name, value in output_arrays(expected).items():
        assert np.isfinite(value).all() and value.std() > 1e-3, name
        # Quantized layers round their inputs too: a last-bit difference
        # of the sharded sums can move one to the next step (~1%).
        np.testing.assert_allclose(
            output_arrays(actual)[name],
            value,
            atol=QUANTIZED_TOLERANCE * np.abs(value).max(),
            rtol=0,
            err_msg=name,
        )


# === 10. Decoders: sequence and context parallelism ===


@functools.cache
def _long_context_reference(name, config_name):
    """Inputs the mesh axes divide, and the unsharded outputs and
    gradients for them."""
    ref = reference(name, config_name)
    inputs = TINY_CONFIGS[name].inputs_for(
        ref.backbone, ref.config, length=LONG_CONTEXT_LENGTH
    )
    return (
        inputs,
        forward(ref.backbone, inputs),
        gradients(ref.backbone, inputs),
    )


@multi_device
@pytest.mark.parametrize(
    "case, mesh_shape, axis_names, sequence_parallel",
    LONG_CONTEXT_CASES,
    ids=[long_context_id(row) for row in LONG_CONTEXT_CASES],
)
def test_long_context_equals_unsharded(
    case, mesh_shape, axis_names, sequence_parallel, monkeypatch
):
    if keras.backend.backend() != "jax":
        pytest.skip("sharding runs on JAX")
    from keras_nlp.distribution import layout_map as layout_map_module

    inputs, expected_outputs, expected_gradients = _long_context_reference(
        *case
    )
    backbone, distribution = sharded(
        *case, mesh_shape, sequence_parallel, axis_names
    )
    plan = distribution._layout_map.plan
    assert_follows_plan_on(backbone, plan, distribution)
    enabled, reason = plan.sequence_parallel
    if sequence_parallel is True and not enabled:
        # Heads the model axis does not divide (GPT-OSS's tiny config on
        # 8): nothing is row-parallel, nothing to split; outputs stay equal.
        assert "no projection is row-parallel" in reason, reason
    expected_axes = set()
    if axis_names and "context" in axis_names:
        assert plan.context_axis == "context"
        expected_axes.add("context")
    if enabled:
        expected_axes.add("model")
    # The sequence axes of every layout applied while tracing (else this
    # would compare whole sequences).
    applied = set()
    original = layout_map_module._activation_layout

    def spy(activation, *args):
        layout = original(activation, *args)
        if getattr(activation, "sequence_axes", ()):
            entry = layout.axes[1]
            applied.update(entry if isinstance(entry, tuple) else (entry,))
        return layout

    monkeypatch.setattr(layout_map_module, "_activation_layout", spy)
    # On meshes with a context axis, attention also runs in chunks of 4
    # queries (16 / 4: every chunk split over 'context' too).
    chunks = query_chunk_scope(4 if axis_names else None)
    with distribution.scope(), chunks:
        outputs = forward(backbone, inputs)
        actual_gradients = gradients(backbone, inputs)
    assert applied == expected_axes, applied
    assert_outputs_close(outputs, expected_outputs, atol=ATOL)
    assert_gradients_close(actual_gradients, expected_gradients)


def assert_follows_plan_on(backbone, plan, distribution):
    """Every variable laid out as `plan` says, on `distribution`'s mesh."""
    from keras_nlp.distribution.layout_map import verify_layouts

    verify_layouts(backbone, plan, distribution.device_mesh)
