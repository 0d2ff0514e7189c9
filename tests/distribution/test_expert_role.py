"""The `EXPERT` role: experts on an expert mesh axis, or on the model axis.

Pure planning (no devices): rules x shapes x mesh shape -> plan. The same
meshes built for real are in `tests/models/test_expert_parallel.py`.
"""

import keras
import pytest

from keras_nlp.distribution import DATA
from keras_nlp.distribution import EXPERT
from keras_nlp.distribution import MODEL
from keras_nlp.distribution import LayoutError
from keras_nlp.distribution import PlanRequest
from keras_nlp.distribution import VariableInfo
from keras_nlp.distribution import normalize_rules
from keras_nlp.distribution import resolve_layout
from keras_nlp.distribution.layout_plan import ALTERNATIVE
from keras_nlp.distribution.layout_plan import SHARDED
from keras_nlp.models import MixtralBackbone
from tests.models.tiny_configs import tiny

EXPERT_RULES = [
    ("moe/gate", (EXPERT, DATA, MODEL)),
    ("attention/query", (DATA, MODEL, None)),
]


def plan_for(num_experts, mesh, expert_axis, strict=False, data_axis="batch"):
    variables = [
        VariableInfo("moe/gate", (num_experts, 16, 8), "float32", True),
        VariableInfo("attention/query", (16, 8, 4), "float32", True),
    ]
    return resolve_layout(
        normalize_rules(EXPERT_RULES, "ToyBackbone"),
        variables,
        PlanRequest(
            mesh, data_axis=data_axis, expert_axis=expert_axis, strict=strict
        ),
        owner="ToyBackbone",
    )


def test_experts_take_the_expert_axis_and_the_rest_shard_over_it():
    plan = plan_for(4, {"batch": 2, "expert": 2, "model": 2}, "expert")
    gate = plan.weight("moe/gate")
    assert gate.spec == ("expert", "batch", "model")
    assert gate.shard_shape == (2, 8, 4)
    assert gate.decision == SHARDED
    # No expert dimension: hidden is split over the data and expert axes.
    assert plan.weight("attention/query").spec == (
        ("batch", "expert"),
        "model",
        None,
    )
    assert plan.memory_ratio == 1.0
    assert plan.expert_axis == "expert"
    assert plan.to_dict()["expert_axis"] == "expert"


def test_without_an_expert_axis_experts_share_the_model_axis():
    plan = plan_for(4, {"batch": 2, "model": 4}, None)
    # The model axis goes to the experts, so the width keeps no axis.
    assert plan.weight("moe/gate").spec == ("model", "batch", None)
    assert plan.weight("attention/query").spec == ("batch", "model", None)
    assert plan.expert_axis is None


def test_an_axis_that_does_not_divide_the_experts_moves_to_the_width():
    plan = plan_for(3, {"batch": 1, "model": 8}, None)
    gate = plan.weight("moe/gate")
    assert gate.spec == (None, "batch", "model")
    assert gate.decision == ALTERNATIVE
    assert gate.fallbacks == ()
    assert [(f.dim, f.axis) for f in gate.moved] == [(0, "model")]
    assert "'model' shards dim 2 instead" in gate.reason
    # Strict accepts it: nothing is replicated.
    plan_for(3, {"batch": 1, "model": 8}, None, strict=True)


def test_an_expert_axis_that_does_not_divide_the_experts():
    mesh = {"batch": 1, "expert": 2, "model": 4}
    gate = plan_for(3, mesh, "expert").weight("moe/gate")
    assert gate.spec == (None, ("batch", "expert"), "model")
    assert gate.decision == ALTERNATIVE
    assert "dim 0 (size 3) is not divisible by 'expert' (size 2)" in (
        gate.reason
    )
    with pytest.raises(LayoutError) as error:
        plan_for(3, mesh, "expert", strict=True)
    message = str(error.value)
    assert "expert axis 'expert' (size 2) does not divide" in message
    assert "moe/gate (3, 16, 8)" in message


def test_no_data_axis_still_shards_over_the_expert_axis():
    plan = plan_for(
        4, {"batch": 2, "expert": 2, "model": 2}, "expert", data_axis=None
    )
    assert plan.weight("moe/gate").spec == ("expert", None, "model")
    assert plan.weight("attention/query").spec == ("expert", "model", None)


def test_the_backbone_finds_the_expert_axis_by_name():
    cls, config = tiny("MixtralBackbone")
    mesh = {"batch": 1, "expert": 4, "model": 2}
    plan = cls.plan_layout(mesh, config=config)
    assert plan.expert_axis == "expert"
    named = cls.plan_layout(
        {"data": 1, "ep": 4, "model": 2},
        config=config,
        data_parallel_dim_name="data",
        expert_parallel_dim_name="ep",
    )
    gates = [w for w in named.weights if w.path.endswith("gate_dense")]
    assert gates and all(w.spec == ("ep", "data", "model") for w in gates)
    # Naming the model axis puts the experts there, as with no expert axis.
    on_model = cls.plan_layout(
        mesh, config=config, expert_parallel_dim_name="model"
    )
    assert on_model.expert_axis is None
    assert on_model.weight(gates[0].path).spec == ("model", "batch", None)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (
            dict(expert_parallel_dim_name="experts"),
            [
                "expert_parallel_dim_name='experts'",
                "['batch', 'expert', 'model']",
            ],
        ),
        (
            dict(expert_parallel_dim_name="batch"),
            ["expert_parallel_dim_name and data_parallel_dim_name", "'batch'"],
        ),
    ],
)
def test_bad_expert_axes_are_named(kwargs, words):
    cls, config = tiny("MixtralBackbone")
    mesh = {"batch": 1, "expert": 4, "model": 2}
    with pytest.raises(ValueError) as error:
        cls.plan_layout(mesh, config=config, **kwargs)
    for word in words:
        assert word in str(error.value)


def test_the_layout_map_carries_the_expert_axis():
    devices = keras.distribution.list_devices()[:8]
    mesh = keras.distribution.DeviceMesh(
        (1, 4, 2), ("batch", "expert", "model"), devices
    )
    layout_map = MixtralBackbone.get_layout_map(mesh)
    assert layout_map.request.expert_axis == "expert"
    assert "expert_axis='expert'" in repr(layout_map)


def test_top_k_above_the_number_of_experts_is_named():
    cls, config = tiny("MixtralBackbone")
    with pytest.raises(ValueError) as error:
        cls(**{**config, "top_k": config["num_experts"] + 1})
    assert "top_k" in str(error.value)
    assert f"at most `num_experts` ({config['num_experts']})" in str(
        error.value
    )
