"""The planning request: checked once where it is made, then passed whole."""

import dataclasses

import pytest

from keras_nlp.distribution import DATA
from keras_nlp.distribution import EXPERT
from keras_nlp.distribution import MODEL
from keras_nlp.distribution import MeshShape
from keras_nlp.distribution import PlanRequest

MESH_3D = {"batch": 1, "expert": 4, "model": 2}


def test_the_mesh_expert_axis_is_taken_when_none_is_named():
    request = PlanRequest.from_arguments(MESH_3D)
    assert request.expert_axis == "expert"
    assert request.role_axes == {
        MODEL: ("model",),
        DATA: ("batch", "expert"),
        EXPERT: ("expert",),
    }
    # Made directly, a request keeps the axes it is given.
    assert PlanRequest(MESH_3D).expert_axis is None


def test_naming_the_model_axis_puts_the_experts_there():
    request = PlanRequest.from_arguments(
        MESH_3D, expert_parallel_dim_name="model"
    )
    assert request.expert_axis is None


def test_the_mesh_is_converted_and_the_request_is_frozen():
    request = PlanRequest("2x4", fsdp_axis=None, tokens_per_step=64)
    assert request.mesh == MeshShape((2, 4), ("batch", "model"))
    assert request.batch_axes == ("batch",)
    assert request.costs.tokens_per_step == 64
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.policy = "memory"


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(policy="smallest"), "policy='smallest'"),
        (dict(tokens_per_step=0), "tokens_per_step=0"),
        (dict(dtype="float12"), "Unknown dtype 'float12'"),
        (dict(model_axis="tp"), "model_parallel_dim_name='tp'"),
        (dict(data_axis="model"), "must name different mesh axes"),
        (dict(fsdp_axis="batch"), "fsdp_dim_name and data_parallel"),
    ],
)
def test_a_bad_setting_fails_where_the_request_is_made(arguments, message):
    with pytest.raises(ValueError, match=message):
        PlanRequest({"batch": 1, "model": 2}, **arguments)
