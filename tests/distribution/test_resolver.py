"""The resolver as a pure function: rules x shapes x mesh shape -> plan."""

import pytest

from keras_nlp.distribution import DATA
from keras_nlp.distribution import MODEL
from keras_nlp.distribution import LayoutError
from keras_nlp.distribution import MeshShape
from keras_nlp.distribution import PlanRequest
from keras_nlp.distribution import VariableInfo
from keras_nlp.distribution import normalize_rules
from keras_nlp.distribution import resolve_layout


def variables(**shapes):
    return [
        VariableInfo(path.replace("__", "/"), shape, "float32", True)
        for path, shape in shapes.items()
    ]


def resolve(raw_rules, vars_, mesh=(1, 2), data_axis="batch", **settings):
    return resolve_layout(
        normalize_rules(raw_rules, "ToyBackbone"),
        vars_,
        PlanRequest(
            MeshShape(mesh, ("batch", "model")), data_axis=data_axis, **settings
        ),
        owner="ToyBackbone",
    )


def test_divisible_dims_get_the_rule_spec():
    plan = resolve(
        [("attn/query", (MODEL, DATA, None))],
        variables(attn__query=(8, 64, 16)),
        mesh=(2, 4),
    )
    weight = plan.weight("attn/query")
    assert weight.spec == ("model", "batch", None)
    assert weight.shard_shape == (2, 32, 16)
    assert weight.decision == "sharded"
    assert weight.fallbacks == ()


KEY_DIMS = ("kv_heads", "hidden", "head_dim")


def test_single_kv_head_is_replicated_on_model_axis_not_split():
    # The default policy ("auto") weighs replication against the model
    # axis on the hidden dimension (tests/distribution/test_policy.py).
    plan = resolve(
        [("attn/key", (MODEL, DATA, None))],
        [VariableInfo("attn/key", (1, 64, 16), "float32", True, KEY_DIMS)],
        mesh=(1, 2),
    )
    weight = plan.weight("attn/key")
    assert weight.spec == (None, "batch", None)
    assert weight.shard_shape == (1, 64, 16)
    assert weight.decision == "fallback"
    assert weight.reason.startswith(
        "dim 0 (kv_heads, size 1) is not divisible by 'model' (size 2), so "
        "it is replicated along 'model'; axis sizes that divide 1: 1; "
        "policy 'auto' chose replicate along 'model'"
    )


@pytest.mark.parametrize("policy", ["auto", "memory", "communication"])
def test_head_dim_is_never_used_as_a_fallback(policy):
    plan = resolve(
        [("attn/key", (MODEL, DATA, None))],
        [VariableInfo("attn/key", (3, 64, 16), "float32", True, KEY_DIMS)],
        mesh=(1, 4),
        policy=policy,
    )
    # 16 divides 4, but head_dim was not named by the rule: it stays whole;
    # the only other place for 'model' is the hidden dimension.
    weight = plan.weight("attn/key")
    assert [c.spec for c in weight.candidates] == [
        (None, "batch", None),
        (None, ("batch", "model"), None),
    ]
    assert weight.spec[2] is None


def test_next_alternative_is_used_when_preferred_does_not_divide():
    plan = resolve(
        [("embeddings", [(MODEL, DATA), (DATA, MODEL)])],
        variables(embeddings=(50257, 768)),
        mesh=(1, 8),
    )
    weight = plan.weight("embeddings")
    assert weight.spec == ("batch", "model")
    assert weight.shard_shape == (50257, 96)
    assert weight.decision == "alternative"
    assert "alternative 2 (DATA, MODEL)" in weight.reason
    assert "dim 0 (size 50257) is not divisible by 'model' (size 8)" in (
        weight.reason
    )


def test_when_no_alternative_divides_the_most_sharded_one_is_kept():
    # Model axis 4 divides neither 6 nor 10; data axis 2 divides both.
    plan = resolve(
        [("w", [(MODEL, DATA), (DATA, MODEL)])],
        variables(w=(6, 10)),
        mesh=(2, 4),
    )
    weight = plan.weight("w")
    assert weight.spec == (None, "batch")
    assert weight.shard_shape == (6, 5)
    assert weight.decision == "fallback"
    assert [(f.dim, f.axis, f.axis_size) for f in weight.fallbacks] == [
        (0, "model", 4)
    ]


def test_multi_axis_entry_drops_its_last_axis_first():
    plan = resolve(
        [("w", ((DATA, MODEL), None))],
        variables(w=(12, 4)),
        mesh=(2, 4),
    )
    weight = plan.weight("w")
    assert weight.spec == ("batch", None)
    assert weight.shard_shape == (6, 4)


def test_multi_axis_entry_is_kept_when_it_divides():
    plan = resolve(
        [("w", ((DATA, MODEL), None))],
        variables(w=(16, 4)),
        mesh=(2, 4),
    )
    assert plan.weight("w").spec == (("batch", "model"), None)
    assert plan.weight("w").shard_shape == (2, 4)


def test_data_axis_none_keeps_weights_whole_along_data():
    plan = resolve(
        [("w", (MODEL, DATA))],
        variables(w=(8, 8)),
        mesh=(2, 4),
        data_axis=None,
    )
    assert plan.weight("w").spec == ("model", None)
    assert plan.weight("w").decision == "sharded"


def test_rank_one_weights_without_rule_are_replicated():
    plan = resolve(
        [("w", (MODEL, DATA))],
        variables(w=(8, 8), norm__scale=(8,)),
    )
    weight = plan.weight("norm/scale")
    assert weight.spec == (None,)
    assert weight.decision == "replicated"
    assert weight.reason == "rank-1 weight (a norm scale or bias), kept whole"


def test_all_none_spec_declares_replication():
    plan = resolve(
        [("router", (None, None))],
        variables(router=(64, 8)),
        mesh=(2, 4),
    )
    weight = plan.weight("router")
    assert weight.decision == "replicated"
    assert weight.reason == "declared replicated by ToyBackbone"


def test_uncovered_matrix_is_an_error_not_silent_replication():
    with pytest.raises(LayoutError) as info:
        resolve([("w", (MODEL, DATA))], variables(w=(8, 8), other=(4, 4)))
    message = str(info.value)
    assert "match no layout rule and would be silently replicated" in message
    assert "other (4, 4)" in message
    assert "ToyBackbone._layout_rules" in message


def test_rule_matching_nothing_is_an_error():
    with pytest.raises(LayoutError) as info:
        resolve(
            [("w", (MODEL, DATA)), ("typo/kernel", (MODEL, DATA))],
            variables(w=(8, 8)),
        )
    assert "match no variable of this config" in str(info.value)
    assert "'typo/kernel'" in str(info.value)


def test_variable_matching_two_rules_is_an_error():
    with pytest.raises(LayoutError) as info:
        resolve(
            [("a/.*", (MODEL, DATA)), (".*/kernel", (DATA, MODEL))],
            variables(a__kernel=(8, 8)),
        )
    assert "a/kernel matches 'a/.*', '.*/kernel'" in str(info.value)


def test_rank_mismatch_is_an_error():
    with pytest.raises(LayoutError) as info:
        resolve([("w", (MODEL, DATA))], variables(w=(8, 8, 8)))
    assert (
        "w has shape (8, 8, 8) (rank 3) but rule 'w' gives 2 entries: "
        "(MODEL, DATA)"
    ) in str(info.value)


def test_strict_names_weight_size_and_dividing_axis_sizes():
    with pytest.raises(LayoutError) as info:
        resolve(
            [("heads", (MODEL, None))],
            variables(heads=(14, 64)),
            mesh=(1, 4),
            strict=True,
        )
    message = str(info.value)
    assert "strict=True: 1 ToyBackbone weight(s)" in message
    assert "heads (14, 64)" in message
    assert "dim 0 (size 14) is not divisible by 'model' (size 4)" in message
    assert "axis sizes that divide 14: 1, 2, 7, 14" in message


def test_strict_accepts_declared_alternatives():
    plan = resolve(
        [("embeddings", [(MODEL, DATA), (DATA, MODEL)])],
        variables(embeddings=(50257, 768)),
        mesh=(1, 8),
        strict=True,
    )
    assert plan.weight("embeddings").spec == ("batch", "model")


def test_totals_and_ratios():
    plan = resolve(
        [("w", (MODEL, None)), ("k", (MODEL, None))],
        variables(w=(8, 4), k=(1, 4), b=(4,)),
        mesh=(1, 2),
        dtype="bfloat16",
    )
    assert plan.total_params == 32 + 4 + 4
    assert plan.params_per_device == 16 + 4 + 4
    assert plan.ideal_params_per_device == 20
    assert plan.total_bytes == 80
    assert plan.bytes_per_device == 48
    assert plan.memory_ratio == pytest.approx(48 / 40)
    # k and b are whole on each device: 8 of 40 parameters.
    assert plan.replicated_bytes_fraction == pytest.approx(8 / 40)
    assert [w.path for w in plan.fallbacks] == ["k"]


def test_unknown_dtype_and_path_are_named():
    with pytest.raises(ValueError) as info:
        resolve([("w", (MODEL, None))], variables(w=(8, 4)), dtype="float128")
    assert "Unknown dtype 'float128' for a layout plan" in str(info.value)
    assert "bfloat16" in str(info.value)
    plan = resolve([("w", (MODEL, None))], variables(w=(8, 4)))
    with pytest.raises(KeyError, match="No weight with path 'v' in the"):
        plan.weight("v")
