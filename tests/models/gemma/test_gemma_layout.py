"""GemmaBackbone sharded on every mesh of the fake 8-device CPU platform."""

import keras
import numpy as np
import pytest

import keras_nlp
from keras_nlp.models import GemmaBackbone
from tests.models.tiny_configs import tiny_configs

pytestmark = pytest.mark.multi_device

# Tiny configs that keep the real query:key/value head ratios (8:1 like
# gemma_2b_en, 16:16 like gemma_7b_en, 8:4 with the Gemma 2 options like
# gemma2_2b_en), from tests/models/tiny_configs.py. tests/models/
# test_conformance.py builds them on its meshes: real shardings equal the
# plan and sharded outputs equal unsharded ones.
TINY = tiny_configs("GemmaBackbone")
HEAD_CONFIGS = ["mqa_8_1", "mha_16_16", "gqa_8_4_gemma2"]

# (batch, model) mesh shapes; the smaller ones use a subset of the devices.
MESHES = [(1, 8), (2, 4), (4, 2), (8, 1), (1, 2), (2, 1), (1, 4)]

# The spec every key/value kernel must get, per config and model-axis size.
EXPECTED_KV_SPEC = {
    "mqa_8_1": {1: ("model", "batch", None)},  # other sizes: replicated
    "mha_16_16": {m: ("model", "batch", None) for m in (1, 2, 4, 8)},
    "gqa_8_4_gemma2": {m: ("model", "batch", None) for m in (1, 2, 4)},
}


def make_mesh(shape):
    devices = keras.distribution.list_devices()[: shape[0] * shape[1]]
    return keras.distribution.DeviceMesh(shape, ("batch", "model"), devices)


def inputs(config, batch=8, length=16):
    rng = np.random.default_rng(0)
    token_ids = rng.integers(0, config["vocabulary_size"], (batch, length))
    padding_mask = np.ones((batch, length), "int32")
    padding_mask[0, :3] = 0
    return {
        "token_ids": token_ids.astype("int32"),
        "padding_mask": padding_mask,
    }


def spec_of(variable):
    spec = tuple(variable.value.sharding.spec)
    return spec + (None,) * (len(variable.shape) - len(spec))


def build_with_class_map(name, mesh_shape):
    mesh = make_mesh(mesh_shape)
    layout_map = GemmaBackbone.get_layout_map(mesh)
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope():
        backbone = GemmaBackbone(**TINY[name])
    return backbone, distribution


@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
@pytest.mark.parametrize("name", HEAD_CONFIGS)
def test_seed_example_plans_every_weight(name, mesh_shape):
    plan = GemmaBackbone.plan_layout(
        dict(zip(("batch", "model"), mesh_shape, strict=True)),
        config=TINY[name],
    )
    model_size = mesh_shape[1]
    kv_spec = EXPECTED_KV_SPEC[name].get(model_size, (None, "batch", None))
    specs = {w.path: w.spec for w in plan.weights}
    for i in range(2):
        block = f"decoder_block_{i}"
        assert specs[f"{block}/attention/query/kernel"] == (
            "model",
            "batch",
            None,
        )
        assert specs[f"{block}/attention/key/kernel"] == kv_spec
        assert specs[f"{block}/attention/value/kernel"] == kv_spec
        assert specs[f"{block}/attention/attention_output/kernel"] == (
            "model",
            None,
            "batch",
        )
        assert specs[f"{block}/ffw_gating/kernel"] == ("batch", "model")
        assert specs[f"{block}/ffw_gating_2/kernel"] == ("batch", "model")
        assert specs[f"{block}/ffw_linear/kernel"] == ("model", "batch")
        assert specs[f"{block}/pre_attention_norm/scale"] == (None,)
    assert specs["token_embedding/embeddings"] == ("model", "batch")
    fallbacks = {w.path for w in plan.fallbacks}
    if kv_spec[0] is None:
        assert fallbacks == {
            f"decoder_block_{i}/attention/{kind}/kernel"
            for i in range(2)
            for kind in ("key", "value")
        }
    else:
        assert fallbacks == set()


@pytest.mark.parametrize(
    "name, mesh_shape",
    [("mqa_8_1", shape) for shape in MESHES]
    + [("mha_16_16", (2, 4)), ("gqa_8_4_gemma2", (4, 2))],
    ids=str,
)
def test_one_training_step_changes_every_weight_shard(name, mesh_shape):
    backbone, distribution = build_with_class_map(name, mesh_shape)
    config = TINY[name]
    # Every vocabulary row is used, so every embedding shard gets a gradient.
    token_ids = np.arange(128, dtype="int32").reshape(8, 16)
    data = {"token_ids": token_ids, "padding_mask": np.ones_like(token_ids)}
    target = (
        np.random.default_rng(1)
        .normal(size=(8, 16, config["hidden_dim"]))
        .astype("float32")
    )
    before = {
        v.path: [np.asarray(s.data) for s in v.value.addressable_shards]
        for v in backbone.weights
    }
    with distribution.scope():
        backbone.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
        backbone.train_on_batch(data, target)
    for variable in backbone.weights:
        shards = variable.value.addressable_shards
        assert len(shards) == mesh_shape[0] * mesh_shape[1]
        for old, shard in zip(before[variable.path], shards, strict=True):
            assert not np.allclose(old, np.asarray(shard.data)), (
                f"{variable.path} shard on {shard.device} did not change"
            )
    # The step kept every weight on its planned layout.
    keras_nlp.distribution.verify_layouts(
        backbone, backbone.layout_plan, distribution.device_mesh
    )
    # Adam's moments are sharded like their weights, not replicated.
    by_slot_name = {v.path.replace("/", "_"): v for v in backbone.weights}
    moments = 0
    for slot in backbone.optimizer.variables:
        prefix, _, kind = slot.name.rpartition("_")
        if kind in ("momentum", "velocity"):
            weight = by_slot_name[prefix]
            assert slot.value.sharding.is_equivalent_to(
                weight.value.sharding, len(weight.shape)
            ), slot.name
            moments += 1
    assert moments == 2 * len(backbone.trainable_weights)


@pytest.mark.parametrize(
    "preset, model_size, kv_spec",
    [("gemma_2b_en", m, (None, "batch", None)) for m in (2, 4, 8)]
    + [("gemma_7b_en", m, ("model", "batch", None)) for m in (2, 4, 8, 16)],
)
def test_full_size_presets_resolve_for_every_model_axis(
    preset, model_size, kv_spec
):
    plan = GemmaBackbone.plan_layout(
        {"batch": 1, "model": model_size}, preset=preset
    )
    assert plan.weight("decoder_block_0/attention/key/kernel").spec == kv_spec
    assert plan.weight("decoder_block_0/attention/value/kernel").spec == kv_spec
    assert plan.weight("decoder_block_0/attention/query/kernel").spec == (
        "model",
        "batch",
        None,
    )


@pytest.mark.parametrize(
    "preset, config_name", [("gemma_2b_en", "2b"), ("gemma_7b_en", "7b")]
)
@pytest.mark.parametrize("mesh_shape", MESHES, ids=str)
def test_seed_example_with_full_size_preset_shapes(
    preset, config_name, mesh_shape
):
    # Full-size head/hidden shapes of the preset with 1 layer and a small
    # vocabulary, so the build stays small while the kernels are real-sized.
    mesh = make_mesh(mesh_shape)
    layout_map = GemmaBackbone.get_layout_map(mesh)
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope():
        backbone = GemmaBackbone.from_preset(
            preset,
            load_weights=False,
            num_layers=1,
            vocabulary_size=256,
            intermediate_dim=256,
        )
    key = backbone.get_layer("decoder_block_0").attention.key_dense.kernel
    expected_heads = {"2b": 1, "7b": 16}[config_name]
    assert key.shape[0] == expected_heads
    model_size = mesh_shape[1]
    if expected_heads % model_size == 0:
        assert spec_of(key) == ("model", "batch", None)
    else:
        assert spec_of(key) == (None, "batch", None)


def test_instance_and_config_calls_resolve_eagerly():
    mesh = make_mesh((2, 4))
    backbone = GemmaBackbone(**TINY["mqa_8_1"])
    from_instance = backbone.get_layout_map(mesh)
    from_config = GemmaBackbone.get_layout_map(mesh, config=TINY["mqa_8_1"])
    key = "decoder_block_1/attention/key/kernel"
    for layout_map in (from_instance, from_config):
        assert layout_map.plan.weight(key).spec == (None, "batch", None)
        assert layout_map[key].axes == (None, "batch", None)
    from_preset = GemmaBackbone.get_layout_map(mesh, preset="gemma_7b_en")
    assert from_preset.plan.preset == "gemma_7b_en"
    assert from_preset[key].axes == ("model", "batch", None)


def test_pinned_map_refuses_a_different_config():
    mesh = make_mesh((1, 2))
    layout_map = GemmaBackbone.get_layout_map(mesh, config=TINY["mqa_8_1"])
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope(), pytest.raises(ValueError) as info:
        GemmaBackbone(**TINY["mha_16_16"])
    message = str(info.value)
    assert "resolved for another config" in message
    assert (
        "decoder_block_0/attention/key/kernel: planned (1, 64, 16), "
        "built (16, 64, 8)"
    ) in message


def test_strict_map_raises_before_any_weight_is_built():
    mesh = make_mesh((1, 2))
    layout_map = GemmaBackbone.get_layout_map(mesh, strict=True)
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope(), pytest.raises(ValueError) as info:
        GemmaBackbone(**TINY["mqa_8_1"])
    message = str(info.value)
    assert "strict=True: 4 GemmaBackbone weight(s)" in message
    assert "decoder_block_0/attention/key/kernel (1, 64, 16)" in message
    assert (
        "dim 0 (kv_heads, size 1) is not divisible by 'model' (size 2)"
        in message
    )
    assert "axis sizes that divide 1: 1" in message


def test_unbound_map_refuses_other_variables():
    mesh = make_mesh((1, 2))
    layout_map = GemmaBackbone.get_layout_map(mesh)
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope(), pytest.raises(ValueError) as info:
        keras.layers.Dense(4).build((None, 8))
    assert "is not bound to a config yet" in str(info.value)
    assert "GemmaBackbone is built inside the distribution's scope" in str(
        info.value
    )


def test_map_from_one_class_refuses_another_backbone():
    class OtherBackbone(keras_nlp.models.Backbone):
        def __init__(self, **kwargs):
            inputs = keras.Input((4,))
            super().__init__(inputs, keras.layers.Dense(4)(inputs), **kwargs)

    mesh = make_mesh((1, 2))
    layout_map = GemmaBackbone.get_layout_map(mesh)
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope(), pytest.raises(ValueError) as info:
        OtherBackbone()
    assert "made by GemmaBackbone.get_layout_map, but a OtherBackbone" in str(
        info.value
    )


def test_verification_catches_weights_off_their_plan():
    mesh = make_mesh((1, 2))
    plan = GemmaBackbone.plan_layout(mesh, config=TINY["mha_16_16"])
    # Built outside any distribution: every weight sits on one device.
    backbone = GemmaBackbone(**TINY["mha_16_16"])
    with pytest.raises(ValueError) as info:
        keras_nlp.distribution.verify_layouts(backbone, plan, mesh)
    message = str(info.value)
    assert "do not follow the layout plan" in message
    assert (
        "decoder_block_0/attention/query/kernel: planned (model, batch, "
        "None), actual SingleDeviceSharding"
    ) in message


def test_base_class_map_binds_to_whichever_backbone_is_built():
    mesh = make_mesh((2, 4))
    layout_map = keras_nlp.models.Backbone.get_layout_map(mesh)
    assert layout_map.plan is None
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope():
        backbone = GemmaBackbone(**TINY["gqa_8_4_gemma2"])
    assert layout_map.plan.backbone == "GemmaBackbone"
    key = backbone.get_layer("decoder_block_0").attention.key_dense.kernel
    assert spec_of(key) == ("model", "batch", None)


def test_no_data_axis_keeps_weights_whole_along_batch():
    mesh = make_mesh((2, 4))
    layout_map = GemmaBackbone.get_layout_map(mesh, data_parallel_dim_name=None)
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope():
        backbone = GemmaBackbone(**TINY["mha_16_16"])
    specs = {v.path: spec_of(v) for v in backbone.weights}
    assert specs["decoder_block_0/attention/query/kernel"] == (
        "model",
        None,
        None,
    )
    assert specs["decoder_block_0/ffw_gating/kernel"] == (None, "model")
    assert specs["token_embedding/embeddings"] == ("model", None)


# Every head layout on an odd model axis; the odd batch axis once (the
# heads do not matter there).
ODD_MESH_CASES = [(name, (1, 3)) for name in HEAD_CONFIGS] + [
    (HEAD_CONFIGS[0], (3, 1))
]


@pytest.mark.parametrize(
    "name, mesh_shape",
    ODD_MESH_CASES,
    ids=[f"{name}-{shape}" for name, shape in ODD_MESH_CASES],
)
def test_odd_mesh_axes_fall_back_instead_of_crashing(name, mesh_shape):
    # No dimension of these configs divides 3: every weight falls back to
    # replication along that axis, says so, and the model still works.
    backbone, distribution = build_with_class_map(name, mesh_shape)
    plan = backbone.layout_plan
    assert all(w.shard_shape == w.shape for w in plan.weights)
    odd_axis = "model" if mesh_shape[1] == 3 else "batch"
    for weight in plan.weights:
        if weight.decision != "replicated":
            assert weight.decision == "fallback", weight.path
            assert f"'{odd_axis}' (size 3)" in weight.reason
    data = inputs(TINY[name], batch=3)
    with distribution.scope():
        sharded = keras.ops.convert_to_numpy(backbone(data))
    reference = GemmaBackbone(**TINY[name])
    reference.set_weights(backbone.get_weights())
    expected = keras.ops.convert_to_numpy(reference(data))
    np.testing.assert_allclose(sharded, expected, atol=1e-5, rtol=1e-5)
