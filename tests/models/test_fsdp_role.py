"""FSDP and tensor parallelism as separate roles on a `(data, fsdp, model)`
mesh: weights shard over fsdp and model only, replicas sit on the data
axis, and the batch splits over data and fsdp
(`keras_nlp.distribution.ModelParallel`).

A decoder whose single key/value head falls back, an encoder and a mixture
of experts build on (2, 2, 2), give the unsharded outputs, take a training
step with the batch split over both axes, train LoRA adapters, and move
presets to and from two-axis meshes.
"""

import keras
import numpy as np
import pytest

from keras_nlp.distribution import ModelParallel
from keras_nlp.models import Backbone
from tests.models.backbone_checks import assert_outputs_close
from tests.models.backbone_checks import assert_same_weights
from tests.models.test_conformance import ATOL
from tests.models.test_conformance import assert_follows_plan
from tests.models.test_conformance import distribution_for
from tests.models.test_conformance import forward
from tests.models.test_conformance import numpy
from tests.models.test_conformance import reference
from tests.models.test_conformance import sharded
from tests.models.tiny_configs import tiny
from tests.models.zoo import build_with_weights

AXES = ("data", "fsdp", "model")
MESH_SHAPE = (2, 2, 2)
CASES = [
    ("GemmaBackbone", "tiny"),
    ("BertBackbone", "tiny"),
    ("MixtralBackbone", "tiny"),
]
pytestmark = pytest.mark.multi_device


def fsdp_distribution(backbone_cls):
    devices = keras.distribution.list_devices()[:8]
    mesh = keras.distribution.DeviceMesh(MESH_SHAPE, AXES, devices)
    layout_map = backbone_cls.get_layout_map(
        mesh, data_parallel_dim_name="data", fsdp_dim_name="fsdp"
    )
    return ModelParallel(layout_map=layout_map, batch_dim_name=("data", "fsdp"))


def build(case):
    ref = reference(*case)
    distribution = fsdp_distribution(ref.backbone_cls)
    with distribution.scope():
        backbone = build_with_weights(
            ref.backbone_cls, ref.config, ref.backbone.weights
        )
    return ref, backbone, distribution


@pytest.mark.parametrize("case", CASES, ids="-".join)
def test_weights_shard_over_fsdp_and_model_only(case):
    ref, backbone, distribution = build(case)
    plan = assert_follows_plan(backbone, MESH_SHAPE)
    assert plan.fsdp_axis == "fsdp"
    used = {
        axis
        for weight in plan.weights
        for entry in weight.spec
        for axis in (entry if isinstance(entry, tuple) else (entry,))
    }
    assert used - {None} == {"fsdp", "model"}
    # Each of the 2 data replicas holds the whole model over its 4 devices:
    # twice the ideal over all 8 (norm scales, kept whole, add a little).
    assert plan.memory_ratio == pytest.approx(2.0, rel=0.25)
    with distribution.scope():
        outputs = forward(backbone, ref.inputs)
    assert_outputs_close(outputs, ref.outputs, atol=ATOL)


@pytest.mark.parametrize("case", CASES[:1], ids="-".join)
def test_a_training_step_splits_the_batch_over_data_and_fsdp(case):
    ref, backbone, distribution = build(case)
    layout = distribution.get_data_layout((8, 12))
    assert layout.axes == (("data", "fsdp"), None)
    assert distribution.num_model_replicas == 4
    with distribution.scope():
        backbone.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        targets = np.zeros(ref.outputs["sequence_output"].shape, "float32")
        history = backbone.fit(
            ref.inputs, targets, batch_size=8, epochs=1, verbose=0
        )
    assert np.isfinite(history.history["loss"][0])
    assert_follows_plan(backbone, MESH_SHAPE)
    changed = [
        v.path
        for v in backbone.trainable_weights
        if not np.allclose(numpy(v.value), ref.weights[v.path])
    ]
    assert changed


@pytest.mark.parametrize("case", CASES[:1], ids="-".join)
def test_lora_and_presets_on_an_fsdp_mesh(case, tmp_path):
    ref, backbone, distribution = build(case)
    backbone.save_to_preset(str(tmp_path / "fsdp"), max_shard_size=0.00001)
    with distribution.scope():
        backbone.enable_lora(2)
    plan = assert_follows_plan(backbone, MESH_SHAPE)
    assert any("/lora_kernel_" in w.path for w in plan.weights)
    with distribution.scope():
        outputs = forward(backbone, ref.inputs)
    assert_outputs_close(outputs, ref.outputs, atol=ATOL)
    # Saved on (data, fsdp, model), loaded on (batch, model), and back.
    two_axis = distribution_for(Backbone, (2, 4))
    with two_axis.scope():
        loaded = Backbone.from_preset(str(tmp_path / "fsdp"))
    assert_follows_plan(loaded, (2, 4))
    assert_same_weights(loaded, ref.weights)
    source, _ = sharded(*case, (2, 4))
    source.save_to_preset(str(tmp_path / "two_axis"))
    with fsdp_distribution(Backbone).scope():
        loaded = Backbone.from_preset(str(tmp_path / "two_axis"))
    assert_follows_plan(loaded, MESH_SHAPE)
    assert_same_weights(loaded, ref.weights)


def test_bad_fsdp_axes_are_named():
    cls, config = tiny("GemmaBackbone")
    mesh = dict(zip(AXES, MESH_SHAPE, strict=True))
    for kwargs, words in (
        (dict(fsdp_dim_name="shards"), ["fsdp_dim_name='shards'", "'fsdp'"]),
        (
            dict(fsdp_dim_name="model"),
            ["fsdp_dim_name and model_parallel_dim_name", "'model'"],
        ),
    ):
        with pytest.raises(ValueError) as error:
            cls.plan_layout(
                mesh, config=config, data_parallel_dim_name="data", **kwargs
            )
        for word in words:
            assert word in str(error.value)
    with pytest.raises(ValueError, match="must name distinct axes"):
        ModelParallel(
            layout_map=fsdp_distribution(cls)._layout_map,
            batch_dim_name=("data", "nope"),
        )
