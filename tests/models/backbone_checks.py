"""Checks every backbone's tests share: plans, sharded builds, oracles.

Each backbone's test folder calls these with its own class, presets and
tiny configs, so every model is held to the same bar:

- `assert_preset_plan_is_efficient`: a built-in preset resolves on a mesh
  without allocating, and a 1B+ preset keeps per-device parameters within
  2% of the ideal unless the only fallbacks are atomic heads, which the
  plan's reasons must name.
- `assert_sharded_build_matches_plan`: a tiny config built under
  `ModelParallel` follows its plan weight by weight and gives the output of
  the unsharded model.
- `assert_matches_oracle`: our backbone equals keras-hub's class of the same
  name with the same weights, copied by variable path.
"""

import keras
import numpy as np

# (batch, model) meshes every decoder backbone is checked on.
MESHES = [(1, 2), (1, 4), (1, 8), (2, 4), (4, 2), (8, 1)]
# Meshes on which sharded outputs are also compared with the unsharded
# model: pure model parallelism (most fallbacks) and a mixed mesh. Each
# comparison compiles the sharded forward pass (~2-3 s on 2 cores), which
# on every mesh would double the suite's time; builds and layouts are
# checked on every mesh.
OUTPUT_MESHES = [(1, 8), (2, 4)]
ONE_BILLION = 1_000_000_000
RATIO_BOUND = 1.02


def mesh_dict(mesh_shape):
    return dict(zip(("batch", "model"), mesh_shape, strict=True))


def make_mesh(mesh_shape):
    devices = keras.distribution.list_devices()[: mesh_shape[0] * mesh_shape[1]]
    return keras.distribution.DeviceMesh(
        mesh_shape, ("batch", "model"), devices
    )


def spec_of(variable):
    """The JAX sharding spec of a variable, padded to its rank."""
    spec = tuple(variable.value.sharding.spec)
    return spec + (None,) * (len(variable.shape) - len(spec))


def assert_preset_plan_is_efficient(backbone_cls, preset, mesh_shape):
    """Resolves `preset` on `mesh_shape` and checks its memory ratio.

    Returns:
        The `LayoutPlan`, for further checks.
    """
    plan = backbone_cls.plan_layout(mesh_dict(mesh_shape), preset=preset)
    assert plan.num_devices == mesh_shape[0] * mesh_shape[1]
    # A weight of rank >= 2 held whole was declared replicated, or fell back
    # with a reason, or its rule only names axes of size 1 on this mesh.
    sizes = mesh_dict(mesh_shape)
    for weight in plan.weights:
        if len(weight.shape) < 2 or weight.shard_shape != weight.shape:
            continue
        if weight.decision in ("replicated", "fallback"):
            continue
        axes = [
            axis
            for entry in weight.spec
            if entry is not None
            for axis in (entry if isinstance(entry, tuple) else (entry,))
        ]
        assert axes and all(sizes[axis] == 1 for axis in axes), (
            f"{preset} {mesh_shape}: {weight.path} {weight.shape} is held "
            f"whole: {weight.reason}"
        )
    if plan.total_params >= ONE_BILLION and plan.memory_ratio > RATIO_BOUND:
        assert plan.fallbacks, (
            f"{preset} on {mesh_shape}: ratio {plan.memory_ratio:.3f} > "
            f"{RATIO_BOUND} without any fallback"
        )
        not_heads = [w.path for w in plan.fallbacks if "heads" not in w.reason]
        assert not not_heads, (
            f"{preset} on {mesh_shape}: ratio {plan.memory_ratio:.3f} > "
            f"{RATIO_BOUND} and these fallbacks are not atomic heads: "
            f"{not_heads[:5]}"
        )
    return plan


def random_inputs(vocabulary_size, batch=8, length=12, seed=0):
    """Token ids with a left-padded first row, as a backbone input dict."""
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(1, vocabulary_size, (batch, length))
    padding_mask = np.ones((batch, length), "int32")
    padding_mask[0, :3] = 0
    token_ids[0, :3] = 0
    return {
        "token_ids": token_ids.astype("int32"),
        "padding_mask": padding_mask,
    }


def build_sharded(backbone_cls, config, mesh_shape):
    """Builds `backbone_cls(**config)` under `ModelParallel` on the class map.

    Returns:
        `(backbone, distribution)`.
    """
    layout_map = backbone_cls.get_layout_map(make_mesh(mesh_shape))
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope():
        backbone = backbone_cls(**config)
    return backbone, distribution


def assert_sharded_build_matches_plan(
    backbone_cls, config, mesh_shape, inputs=None, atol=1e-5
):
    """Builds sharded, checks every spec against the plan and the output.

    The output is compared with the unsharded model's on `OUTPUT_MESHES`.

    Returns:
        The sharded backbone's `LayoutPlan`.
    """
    backbone, distribution = build_sharded(backbone_cls, config, mesh_shape)
    plan = backbone.layout_plan
    assert plan is not None
    actual = {v.path: spec_of(v) for v in backbone.weights}
    assert actual == {w.path: w.spec for w in plan.weights}
    # The sharded weights are really split: nothing planned sharded is whole.
    variables = {v.path: v for v in backbone.weights}
    for weight in plan.weights:
        if weight.shard_shape != weight.shape:
            shard = variables[weight.path].value.addressable_shards[0].data
            assert tuple(shard.shape) == weight.shard_shape, weight.path

    if tuple(mesh_shape) not in OUTPUT_MESHES:
        return plan
    if inputs is None:
        inputs = random_inputs(config["vocabulary_size"])
    with distribution.scope():
        sharded = keras.ops.convert_to_numpy(backbone(inputs))
    reference = backbone_cls(**config)
    reference.set_weights(backbone.get_weights())
    expected = keras.ops.convert_to_numpy(reference(inputs))
    np.testing.assert_allclose(sharded, expected, atol=atol, rtol=atol)
    return plan


def copy_weights_by_path(source, target, seed=0):
    """Gives `target` the weights of `source`, matched by variable path.

    Normalization scales and biases, which initialize to constants, are
    first randomized on `source` so that a swapped or ignored one shows up
    in the outputs.
    """
    source_weights = {v.path: v for v in source.weights}
    target_weights = {v.path: v for v in target.weights}
    assert sorted(source_weights) == sorted(target_weights), (
        "variable paths differ: only in source "
        f"{sorted(set(source_weights) - set(target_weights))}, only in "
        f"target {sorted(set(target_weights) - set(source_weights))}"
    )
    rng = np.random.default_rng(seed)
    for path, variable in source_weights.items():
        assert tuple(target_weights[path].shape) == tuple(variable.shape), path
        if path.rsplit("/", 1)[-1] in ("scale", "gamma", "beta", "bias"):
            value = rng.normal(0.0, 0.5, variable.shape).astype(variable.dtype)
            variable.assign(value)
        target_weights[path].assign(keras.ops.convert_to_numpy(variable))


def assert_matches_oracle(ours, oracle, inputs, atol=1e-5):
    """Copies the oracle's weights into ours and compares the outputs.

    Only real tokens are compared: a padded query attends to no key, so its
    output is undefined and differs between backends' attention kernels.

    Returns:
        The largest absolute difference over real tokens.
    """
    copy_weights_by_path(oracle, ours)
    expected = keras.ops.convert_to_numpy(oracle(inputs))
    actual = keras.ops.convert_to_numpy(ours(inputs))
    assert actual.shape == expected.shape
    real = np.asarray(inputs["padding_mask"]).astype(bool)
    np.testing.assert_allclose(
        actual[real], expected[real], atol=atol, rtol=atol
    )
    return float(np.max(np.abs(actual[real] - expected[real])))


def assert_config_round_trip(backbone_cls, config, inputs, name="my_backbone"):
    """`get_config` keeps every argument; `from_config` rebuilds the same.

    Returns:
        The backbone built from `config`.
    """
    model = backbone_cls(**config, name=name)
    saved = model.get_config()
    for key, value in config.items():
        assert saved[key] == value, key
    assert saved["name"] == name
    assert "dtype" in saved and "trainable" in saved
    clone = backbone_cls.from_config(saved)
    assert clone.get_config() == saved
    clone.set_weights(model.get_weights())
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(clone(inputs)),
        keras.ops.convert_to_numpy(model(inputs)),
    )
    return model


def assert_output_shape_and_bfloat16(backbone_cls, config, inputs):
    """Output is (batch, length, hidden); bfloat16 weights and outputs."""
    batch, length = inputs["token_ids"].shape
    model = backbone_cls(**config)
    out = model(inputs)
    assert tuple(out.shape) == (batch, length, config["hidden_dim"])
    assert set(model.input) == {"token_ids", "padding_mask"}

    model = backbone_cls(**config, dtype="bfloat16")
    out = model(inputs)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    assert all(
        keras.backend.standardize_dtype(v.dtype) == "bfloat16"
        for v in model.weights
    )
    as_float = keras.ops.cast(out, "float32")
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(as_float)))


def assert_left_padding_is_invisible(model, inputs, row, pad, atol=1e-5):
    """Row `row`, left-padded by `pad`, equals its unpadded run."""
    padded = keras.ops.convert_to_numpy(model(inputs))
    unpadded = keras.ops.convert_to_numpy(
        model({k: v[row : row + 1, pad:] for k, v in inputs.items()})
    )
    np.testing.assert_allclose(padded[row : row + 1, pad:], unpadded, atol=atol)


def assert_causal(model, inputs, new_token=11):
    """Changing the last token changes only the last position."""
    changed = {k: v.copy() for k, v in inputs.items()}
    changed["token_ids"][:, -1] = new_token
    before = keras.ops.convert_to_numpy(model(inputs))
    after = keras.ops.convert_to_numpy(model(changed))
    np.testing.assert_array_equal(before[:, :-1], after[:, :-1])
    assert not np.allclose(before[:, -1], after[:, -1])
