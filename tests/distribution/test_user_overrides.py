"""Entries a user sets on the returned layout map override the plan."""

import keras
import numpy as np
import pytest

from keras_nlp.distribution import LayoutError
from keras_nlp.models import LlamaBackbone
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import spec_of

pytestmark = pytest.mark.multi_device

TINY = dict(
    vocabulary_size=64,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=4,
    hidden_dim=32,
    intermediate_dim=48,
)
FFW_OUTPUT = "transformer_layer_0/feedforward_output_dense/kernel"


def build(layout_map):
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope():
        return LlamaBackbone(**TINY)


def test_a_regex_entry_on_an_unbound_map_replaces_the_plan():
    layout_map = LlamaBackbone.get_layout_map(make_mesh((2, 4)))
    layout_map[r"transformer_layer_\d+/feedforward_output_dense/kernel"] = (
        None,
        None,
    )
    backbone = build(layout_map)
    for index in range(2):
        path = f"transformer_layer_{index}/feedforward_output_dense/kernel"
        weight = backbone.layout_plan.weight(path)
        assert (weight.decision, weight.spec) == ("user", (None, None))
        assert "set on the layout map by the user" in weight.reason
    variables = {v.path: v for v in backbone.weights}
    assert spec_of(variables[FFW_OUTPUT]) == (None, None)
    # Everything else keeps its rule.
    query = backbone.layout_plan.weight(
        "transformer_layer_0/self_attention/query/kernel"
    )
    assert (query.decision, query.spec) == ("sharded", ("batch", "model", None))


def test_an_exact_path_on_a_pinned_map_changes_its_plan_at_once():
    layout_map = LlamaBackbone.get_layout_map(make_mesh((2, 4)), config=TINY)
    assert layout_map.plan.weight(FFW_OUTPUT).spec == ("model", "batch")
    layout_map[FFW_OUTPUT] = keras.distribution.TensorLayout(("batch", None))
    weight = layout_map.plan.weight(FFW_OUTPUT)
    assert (weight.decision, weight.spec) == ("user", ("batch", None))
    other = "transformer_layer_1/feedforward_output_dense/kernel"
    assert layout_map.plan.weight(other).spec == ("model", "batch")
    backbone = build(layout_map)
    variables = {v.path: v for v in backbone.weights}
    assert spec_of(variables[FFW_OUTPUT]) == ("batch", None)
    assert spec_of(variables[other]) == ("model", "batch")
    del layout_map[FFW_OUTPUT]
    assert layout_map.plan.weight(FFW_OUTPUT).decision == "sharded"


def test_outputs_do_not_change_with_an_override():
    reference = LlamaBackbone(**TINY)
    layout_map = LlamaBackbone.get_layout_map(make_mesh((1, 8)))
    layout_map[r".*feedforward_gate_dense/kernel"] = (None, "model")
    backbone = build(layout_map)
    backbone.set_weights(reference.get_weights())
    inputs = {
        "token_ids": np.array([[3, 9, 4, 1]] * 2, "int32"),
        "padding_mask": np.ones((2, 4), "int32"),
    }
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(backbone(inputs)),
        keras.ops.convert_to_numpy(reference(inputs)),
        atol=1e-5,
    )


@pytest.mark.parametrize(
    "key, layout, words",
    [
        (FFW_OUTPUT, ("model",), ["has 1 entries", "rank 2"]),
        (
            "transformer_layer_0/self_attention/key/kernel",
            (None, "model", None),
            ["dim 1", "size 4", "(size 8)"],
        ),
        (FFW_OUTPUT, ("model", "model"), ["uses a mesh axis on two"]),
        ("transformer_layer_9/.*", (None, None), ["matches no variable"]),
    ],
)
def test_invalid_entries_name_themselves_when_the_map_binds(key, layout, words):
    layout_map = LlamaBackbone.get_layout_map(make_mesh((1, 8)))
    layout_map[key] = layout
    with pytest.raises(LayoutError) as error:
        build(layout_map)
    assert repr(key) in str(error.value)
    for word in words:
        assert word in str(error.value)


def test_an_invalid_entry_on_a_pinned_map_fails_at_once_and_is_dropped():
    layout_map = LlamaBackbone.get_layout_map(make_mesh((1, 8)), config=TINY)
    with pytest.raises(LayoutError, match="matches no variable"):
        layout_map["no_such_layer/kernel"] = (None, None)
    assert layout_map.user_entries == ()
    assert layout_map.plan.weight(FFW_OUTPUT).decision == "sharded"


def test_two_entries_on_one_variable_are_an_error():
    layout_map = LlamaBackbone.get_layout_map(make_mesh((1, 8)))
    layout_map[r".*feedforward_output_dense/kernel"] = (None, None)
    layout_map[FFW_OUTPUT] = ("model", None)
    with pytest.raises(LayoutError, match="matches the entries"):
        build(layout_map)


@pytest.mark.parametrize(
    "key, layout, message",
    [
        (FFW_OUTPUT, ("tensor", None), r"names \['tensor'\]"),
        ("a(b", (None,), "not a valid regex"),
        (FFW_OUTPUT, "model", "tuple of mesh axis names"),
    ],
)
def test_malformed_entries_fail_when_set(key, layout, message):
    layout_map = LlamaBackbone.get_layout_map(make_mesh((1, 8)))
    with pytest.raises(ValueError, match=message):
        layout_map[key] = layout


def test_the_plan_table_shows_the_user_decision():
    layout_map = LlamaBackbone.get_layout_map(make_mesh((1, 8)), config=TINY)
    layout_map[r".*feedforward_output_dense/kernel"] = (None, None)
    rows = [
        (template, weight.decision)
        for template, _, weight in layout_map.plan.grouped_rows()
    ]
    assert (
        "transformer_layer_{i}/feedforward_output_dense/kernel",
        "user",
    ) in rows
