"""GemmaBackbone's layout maps at work: binding, refusals, training, odd
meshes. Every preset's and tiny config's plan is pinned by
tests/models/test_preset_plans.py."""

import keras
import numpy as np
import pytest

import keras_nlp
from keras_nlp.models import GemmaBackbone
from tests.models.backbone_checks import assert_outputs_close
from tests.models.backbone_checks import jit_forward
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import spec_of
from tests.models.tiny_configs import tiny_configs
from tests.models.zoo import build_with_weights

pytestmark = pytest.mark.multi_device

TINY = tiny_configs("GemmaBackbone")
KEY = "decoder_block_0/attention/key/kernel"


def scope(layout_map):
    return keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )


def build(name, mesh_shape, **kwargs):
    layout_map = GemmaBackbone.get_layout_map(make_mesh(mesh_shape), **kwargs)
    distribution = scope(layout_map)
    with distribution.scope():
        return GemmaBackbone(**TINY[name]), distribution


def shards(variable):
    return [np.asarray(s.data) for s in variable.value.addressable_shards]


def refusal(layout_map, make):
    with scope(layout_map).scope(), pytest.raises(ValueError) as info:
        make()
    return str(info.value)


def test_one_training_step_changes_every_weight_shard():
    backbone, distribution = build("mqa_8_1", (2, 4))
    # Every vocabulary row is used, so every embedding shard gets a gradient.
    token_ids = np.arange(128, dtype="int32").reshape(8, 16)
    data = {"token_ids": token_ids, "padding_mask": np.ones_like(token_ids)}
    hidden = TINY["mqa_8_1"]["hidden_dim"]
    target = np.random.default_rng(1).normal(size=(8, 16, hidden))
    before = {v.path: shards(v) for v in backbone.weights}
    with distribution.scope():
        backbone.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
        backbone.train_on_batch(data, target.astype("float32"))
    for variable in backbone.weights:
        after = shards(variable)
        assert len(after) == 8
        for old, new in zip(before[variable.path], after, strict=True):
            assert not np.allclose(old, new), variable.path
    # The step kept every weight on its planned layout, and Adam's moments
    # are sharded like their weights, not replicated.
    keras_nlp.distribution.verify_layouts(
        backbone, backbone.layout_plan, distribution.device_mesh
    )
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


def test_instance_config_and_preset_calls_resolve_eagerly():
    mesh = make_mesh((2, 4))
    backbone = GemmaBackbone(**TINY["mqa_8_1"])
    for layout_map in (
        backbone.get_layout_map(mesh),
        GemmaBackbone.get_layout_map(mesh, config=TINY["mqa_8_1"]),
    ):
        assert layout_map.plan.weight(KEY).spec == (None, "batch", None)
        assert layout_map[KEY].axes == (None, "batch", None)
    from_preset = GemmaBackbone.get_layout_map(mesh, preset="gemma_7b_en")
    assert from_preset.plan.preset == "gemma_7b_en"
    assert from_preset[KEY].axes == ("model", "batch", None)


def test_maps_refuse_what_they_were_not_made_for():
    mesh = make_mesh((1, 2))
    pinned = GemmaBackbone.get_layout_map(mesh, config=TINY["mqa_8_1"])
    message = refusal(pinned, lambda: GemmaBackbone(**TINY["mha_16_16"]))
    assert "resolved for another config" in message
    assert f"{KEY}: planned (1, 64, 16), built (16, 64, 8)" in message
    # Strict: before any weight is built.
    strict = GemmaBackbone.get_layout_map(mesh, strict=True)
    message = refusal(strict, lambda: GemmaBackbone(**TINY["mqa_8_1"]))
    assert "strict=True: 4 GemmaBackbone weight(s)" in message
    assert f"{KEY} (1, 64, 16)" in message
    assert "dim 0 (kv_heads, size 1) is not divisible by 'model'" in message
    assert "axis sizes that divide 1: 1" in message
    unbound = GemmaBackbone.get_layout_map(mesh)
    message = refusal(unbound, lambda: keras.layers.Dense(4).build((None, 8)))
    assert "is not bound to a config yet" in message
    assert "GemmaBackbone is built inside the distribution's scope" in message

    class OtherBackbone(keras_nlp.models.Backbone):
        def __init__(self, **kwargs):
            inputs = keras.Input((4,))
            super().__init__(inputs, keras.layers.Dense(4)(inputs), **kwargs)

    message = refusal(GemmaBackbone.get_layout_map(mesh), OtherBackbone)
    assert "made by GemmaBackbone.get_layout_map, but a OtherBackbone" in (
        message
    )


def test_verification_catches_weights_off_their_plan():
    mesh = make_mesh((1, 2))
    plan = GemmaBackbone.plan_layout(mesh, config=TINY["mha_16_16"])
    # Built outside any distribution: every weight sits on one device.
    backbone = GemmaBackbone(**TINY["mha_16_16"])
    with pytest.raises(ValueError) as info:
        keras_nlp.distribution.verify_layouts(backbone, plan, mesh)
    assert "do not follow the layout plan" in str(info.value)
    assert (
        "decoder_block_0/attention/query/kernel: planned (model, batch, "
        "None), actual SingleDeviceSharding"
    ) in str(info.value)


def test_base_class_map_binds_to_whichever_backbone_is_built():
    layout_map = keras_nlp.models.Backbone.get_layout_map(make_mesh((2, 4)))
    assert layout_map.plan is None
    with scope(layout_map).scope():
        backbone = GemmaBackbone(**TINY["gqa_8_4_gemma2"])
    assert layout_map.plan.backbone == "GemmaBackbone"
    key = backbone.get_layer("decoder_block_0").attention.key_dense.kernel
    assert spec_of(key) == ("model", "batch", None)


def test_no_data_axis_keeps_weights_whole_along_batch():
    backbone, _ = build("mha_16_16", (2, 4), data_parallel_dim_name=None)
    specs = {v.path: spec_of(v) for v in backbone.weights}
    query = "decoder_block_0/attention/query/kernel"
    assert specs[query] == ("model", None, None)
    assert specs["decoder_block_0/ffw_gating/kernel"] == (None, "model")
    assert specs["token_embedding/embeddings"] == ("model", None)


@pytest.mark.parametrize("mesh_shape", [(1, 3), (3, 1)], ids=str)
def test_odd_mesh_axes_fall_back_instead_of_crashing(mesh_shape):
    # No dimension of the config divides 3: every weight falls back to
    # replication along that axis, says so, and the model still works.
    backbone, distribution = build("mqa_8_1", mesh_shape)
    odd_axis = "model" if mesh_shape[1] == 3 else "batch"
    for weight in backbone.layout_plan.weights:
        assert weight.shard_shape == weight.shape
        if weight.decision != "replicated":
            assert weight.decision == "fallback", weight.path
            assert f"'{odd_axis}' (size 3)" in weight.reason
    token_ids = np.random.default_rng(0).integers(1, 128, (3, 16))
    data = {"token_ids": token_ids, "padding_mask": np.ones_like(token_ids)}
    with distribution.scope():
        sharded = jit_forward(backbone, data)
    reference = build_with_weights(
        GemmaBackbone, TINY["mqa_8_1"], backbone.weights
    )
    assert_outputs_close(sharded, jit_forward(reference, data), rtol=1e-5)
