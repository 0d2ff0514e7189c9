"""Validation of what a backbone's `_layout_rules(config)` returns."""

import pytest

from keras_nlp.distribution import DATA
from keras_nlp.distribution import MODEL
from keras_nlp.distribution import MeshShape
from keras_nlp.distribution import normalize_rules


def test_single_spec_and_alternatives_are_normalized():
    rules = normalize_rules(
        [("a", (MODEL, None)), ("b", [(MODEL, DATA), (DATA, MODEL)])], "Toy"
    )
    assert rules[0].alternatives == ((MODEL, None),)
    assert rules[1].alternatives == ((MODEL, DATA), (DATA, MODEL))
    assert rules[0].matches("a") and not rules[0].matches("ab")


def test_named_dimensions_appear_in_fallback_reasons():
    from keras_nlp.distribution import PlanRequest
    from keras_nlp.distribution import VariableInfo
    from keras_nlp.distribution import resolve_layout

    rules = normalize_rules(
        [("kv", (DATA, MODEL, None), ("hidden", "kv_heads", "head_dim"))],
        "Toy",
    )
    plan = resolve_layout(
        rules,
        [VariableInfo("kv", (8, 2, 4), "float32", True)],
        PlanRequest(MeshShape.parse("1x4")),
        owner="Toy",
    )
    (weight,) = plan.fallbacks
    assert weight.spec == ("batch", None, None)
    assert "dim 1 (kv_heads, size 2) is not divisible by 'model'" in (
        weight.reason
    )


def test_one_role_tuple_collapses_to_the_role():
    (rule,) = normalize_rules([("a", ((MODEL,), None))], "Toy")
    assert rule.alternatives == ((MODEL, None),)


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"a": (MODEL,)}, "must return a list of (regex, spec) pairs"),
        ([("a", (MODEL,), 3, 4)], "must return (regex, spec) pairs"),
        ([("a", (MODEL,), 3)], "has dimension names 3; expected a tuple"),
        ([("a", (MODEL,), ("x", "y"))], "expected a tuple of 1 strings"),
        ([(3, (MODEL,))], "layout rule keys must be regex strings"),
        (
            [("a", (MODEL,)), ("a", (DATA,))],
            "declares the layout rule 'a' twice",
        ),
        ([("(a", (MODEL,))], "is not a valid regex"),
        ([("a", [])], "must map to a spec tuple or a non-empty list"),
        ([("a", ["model"])], "has a spec that is not a tuple"),
        ([("a", ("model", None))], "invalid spec entry 'model'"),
        ([("a", (MODEL, MODEL))], "uses a role on two dimensions"),
        ([("a", ((MODEL, MODEL),))], "repeats a role within one dimension"),
        ([("a", [(MODEL,), (MODEL, None)])], "alternatives of different ranks"),
    ],
)
def test_bad_rules_are_named_in_the_error(raw, message):
    with pytest.raises(ValueError, match="Toy") as info:
        normalize_rules(raw, "Toy")
    assert message in str(info.value)


def test_mesh_shape_parse_and_errors():
    assert MeshShape.parse("2x4").axis_sizes == {"batch": 2, "model": 4}
    assert MeshShape.parse("2x4").num_devices == 8
    with pytest.raises(
        ValueError, match="Could not read the mesh shape '2by4'"
    ):
        MeshShape.parse("2by4")
    assert MeshShape.parse("1x4x2").axis_sizes == {
        "batch": 1,
        "expert": 4,
        "model": 2,
    }
    with pytest.raises(ValueError, match="has 3 axes but 2 axis names"):
        MeshShape.parse("1x2x2", ("batch", "model"))
    with pytest.raises(
        ValueError, match="has 4 axes; pass one axis name per size"
    ):
        MeshShape.parse("1x2x2x2")
    with pytest.raises(
        ValueError, match="positive integers. Received shape=\\(0, 2\\)"
    ):
        MeshShape((0, 2))
    with pytest.raises(ValueError, match="Received an object of type list"):
        MeshShape.from_mesh([1, 2])
