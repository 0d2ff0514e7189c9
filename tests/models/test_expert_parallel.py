"""Expert parallelism: mixture-of-experts backbones on a mesh with an expert
axis, `(batch, expert, model)`.

Every enrolled class with experts builds on (1, 4, 2) and (2, 2, 2) with its
experts split over the expert axis and the rest over (batch, expert) and
model, gives the unsharded outputs, takes a training step, trains LoRA
adapters, and loads a preset saved on one expert mesh onto another and onto
a (batch, model) mesh. The plans themselves (roles, fallbacks, strict
errors) are checked without devices in `tests/distribution/`.
"""

import keras
import numpy as np
import pytest

from keras_nlp.models import Backbone
from tests.models.backbone_checks import assert_outputs_close
from tests.models.backbone_checks import assert_same_weights
from tests.models.backbone_checks import mesh_dict
from tests.models.test_conformance import ATOL
from tests.models.test_conformance import assert_follows_plan
from tests.models.test_conformance import distribution_for
from tests.models.test_conformance import forward
from tests.models.test_conformance import numpy
from tests.models.test_conformance import reference
from tests.models.test_conformance import sharded
from tests.models.tiny_configs import TINY_CONFIGS
from tests.models.tiny_configs import tiny
from tests.models.zoo import build_with_weights

EXPERT_MESHES = [(1, 4, 2), (2, 2, 2)]
MOE_CASES = [
    (name, "tiny")
    for name in sorted(TINY_CONFIGS)
    if {"num_experts", "n_routed_experts"} & set(tiny(name)[1])
]
multi_device = pytest.mark.multi_device
# Every built-in MoE preset is planned on these (without devices).
PRESET_MESHES = [(1, 8), (2, 4), (1, 4, 2)]


def is_expert_weight(path):
    """Whether a variable path is an expert bank's: `.../experts/...`, or
    Gemma 4's `.../moe_expert_bank/...` (keras-hub's names)."""
    return "/experts/" in path or "/moe_expert_bank/" in path


def expert_weights(plan):
    """The plans of the weights with an `experts` dimension first."""
    return [w for w in plan.weights if is_expert_weight(w.path)]


def test_the_moe_classes_are_enrolled():
    assert {name for name, _ in MOE_CASES} >= {"MixtralBackbone"}


MOE_PRESETS = [
    (name, preset)
    for name, _ in MOE_CASES
    for preset in sorted(tiny(name)[0].presets)
]


@pytest.mark.parametrize("name, preset", MOE_PRESETS)
def test_every_moe_preset_plans_near_the_ideal(name, preset):
    backbone_cls = tiny(name)[0]
    for mesh_shape in PRESET_MESHES:
        plan = backbone_cls.plan_layout(mesh_dict(mesh_shape), preset=preset)
        assert plan.expert_axis == ("expert" if len(mesh_shape) == 3 else None)
        assert plan.memory_ratio <= 1.02, (mesh_shape, plan.summary())


@multi_device
@pytest.mark.parametrize("mesh_shape", EXPERT_MESHES, ids=str)
@pytest.mark.parametrize("case", MOE_CASES, ids="-".join)
def test_experts_split_over_the_expert_axis(case, mesh_shape):
    backbone, distribution = sharded(*case, mesh_shape)
    plan = assert_follows_plan(backbone, mesh_shape)
    assert plan.expert_axis == "expert"
    experts = expert_weights(plan)
    assert experts
    for weight in experts:
        assert weight.spec[0] == "expert", weight.path
        if len(weight.shape) == 3:  # kernels; biases have no width
            assert "model" in weight.spec, weight.path
    # Weights without experts shard FSDP-style over the expert axis too:
    # the query's contracted dimension (hidden, or DeepSeek-V3's query
    # latent for `query_b`; Gemma's query kernels are heads-first).
    query = next(
        w
        for w in plan.weights
        if w.path.endswith(("query/kernel", "query_b/kernel"))
    )
    names = query.dim_names
    contracted = "query_latent" if "query_latent" in names else "hidden"
    assert query.spec[names.index(contracted)] == ("batch", "expert")
    ref = reference(*case)
    with distribution.scope():
        outputs = forward(backbone, ref.inputs)
    assert_outputs_close(outputs, ref.outputs, atol=ATOL)


@multi_device
@pytest.mark.parametrize("case", MOE_CASES, ids="-".join)
def test_a_training_step_on_an_expert_mesh(case):
    mesh_shape = (2, 2, 2)
    ref = reference(*case)
    distribution = distribution_for(ref.backbone_cls, mesh_shape)
    with distribution.scope():
        backbone = build_with_weights(
            ref.backbone_cls, ref.config, ref.backbone.weights
        )
        backbone.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        targets = np.zeros(ref.outputs["sequence_output"].shape, "float32")
        history = backbone.fit(
            ref.inputs, targets, batch_size=8, epochs=1, verbose=0
        )
    (loss,) = history.history["loss"]
    assert np.isfinite(loss) and loss > 0
    assert_follows_plan(backbone, mesh_shape)
    before = ref.weights
    moved = [
        v.path
        for v in backbone.weights
        if is_expert_weight(v.path)
        and not np.allclose(numpy(v.value), before[v.path])
    ]
    assert moved, "no expert weight was trained"


@multi_device
@pytest.mark.parametrize("case", MOE_CASES, ids="-".join)
def test_lora_on_an_expert_mesh(case):
    mesh_shape = (1, 4, 2)
    ref = reference(*case)
    distribution = distribution_for(ref.backbone_cls, mesh_shape)
    with distribution.scope():
        backbone = build_with_weights(
            ref.backbone_cls, ref.config, ref.backbone.weights
        )
        backbone.enable_lora(2)
    plan = assert_follows_plan(backbone, mesh_shape)
    adapters = [w for w in plan.weights if "/lora_kernel_" in w.path]
    assert adapters
    assert {w.path for w in adapters} == {
        v.path for v in backbone.trainable_weights
    }
    with distribution.scope():
        outputs = forward(backbone, ref.inputs)
    assert_outputs_close(outputs, ref.outputs, atol=ATOL)


@multi_device
@pytest.mark.parametrize("case", MOE_CASES, ids="-".join)
def test_a_preset_moves_between_expert_meshes(case, tmp_path):
    ref = reference(*case)
    source, _ = sharded(*case, (1, 4, 2))
    source.save_to_preset(str(tmp_path), max_shard_size=0.00001)
    for target_mesh in [(2, 2, 2), (2, 4)]:
        distribution = distribution_for(Backbone, target_mesh)
        with distribution.scope():
            loaded = Backbone.from_preset(str(tmp_path))
        plan = assert_follows_plan(loaded, target_mesh)
        assert plan.expert_axis == ("expert" if len(target_mesh) == 3 else None)
        assert_same_weights(loaded, ref.weights)
