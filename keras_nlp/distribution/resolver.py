"""Resolving a backbone's layout rules against real shapes and a mesh.

This is the one place that decides where weights go. Rules name roles per
dimension; `PlanRequest` says which mesh axis plays each role. Each
variable is matched to its rule (`rule_matching`), the rule's roles become
mesh axes that divide the real shape (`placement`), and where an axis does
not divide the dimension its rule puts it on, the request's policy picks
among the candidates (replicate along it, or move it to another dimension
the rule names) by the estimated costs of `keras_nlp.distribution.cost`.
LoRA adapters follow their kernels (`lora_adapters`); every problem found
is raised at once (`layout_errors`).
"""

import collections
import dataclasses

from keras_nlp.distribution.cost import choose
from keras_nlp.distribution.cost import estimate
from keras_nlp.distribution.cost import layer_of
from keras_nlp.distribution.layout_errors import check_strict
from keras_nlp.distribution.layout_errors import raise_rule_problems
from keras_nlp.distribution.layout_plan import ALTERNATIVE
from keras_nlp.distribution.layout_plan import FALLBACK
from keras_nlp.distribution.layout_plan import REPLICATED
from keras_nlp.distribution.layout_plan import SHARDED
from keras_nlp.distribution.layout_plan import LayoutPlan
from keras_nlp.distribution.layout_plan import WeightPlan
from keras_nlp.distribution.lora_adapters import plan_adapters
from keras_nlp.distribution.placement import candidates
from keras_nlp.distribution.placement import preferred_placement
from keras_nlp.distribution.placement import shard_shape
from keras_nlp.distribution.rule_matching import match_variables
from keras_nlp.distribution.rules import entry_axes
from keras_nlp.distribution.rules import format_spec


def resolve_layout(rules, variables, request, *, owner, user_entries=()):
    """Resolves layout rules against variables and a mesh into a plan.

    Args:
        rules: list of `LayoutRule` (see `normalize_rules`).
        variables: the model's `VariableInfo`s (see `abstract_variables`).
        request: a `PlanRequest`: the mesh, the axis of each role,
            `strict`, the policy, the tokens per step and the dtype.
        owner: the backbone class name, for messages.
        user_entries: `UserEntry`s set on the layout map; each takes
            precedence over the rules for the variables it matches.

    Returns:
        A `LayoutPlan`, with no config or preset (the caller adds them).

    Raises:
        LayoutError: if a variable of rank >= 2 matches no rule, a variable
            matches two rules, a rule's rank or dimension names differ from
            its variable's, a rule matches no variable, a user entry is
            invalid for what it matches or matches nothing, or (`strict`) a
            rule cannot be applied as written or the expert axis does not
            divide an expert dimension.

    Example:

    ```python
    from keras_nlp.distribution import MODEL
    from keras_nlp.distribution import PlanRequest
    from keras_nlp.distribution import VariableInfo
    from keras_nlp.distribution import normalize_rules
    from keras_nlp.distribution import resolve_layout

    plan = resolve_layout(
        normalize_rules([("dense/kernel", (None, MODEL))], "Toy"),
        [VariableInfo("dense/kernel", (8, 4), "float32", True)],
        PlanRequest({"batch": 1, "model": 2}),
        owner="Toy",
    )
    plan.weight("dense/kernel").spec  # (None, "model")
    ```
    """
    matching = match_variables(rules, variables, user_entries, request, owner)
    weights = matching.planned + _resolve_matched(matching.matched, request)
    adapters, unplanned = plan_adapters(matching.adapters, weights, request)
    matching.problems["adapter"].extend(unplanned)
    raise_rule_problems(owner, matching.problems)
    by_path = {weight.path: weight for weight in weights + adapters}
    plan = LayoutPlan(
        backbone=owner,
        config={},
        mesh=request.mesh,
        model_axis=request.model_axis,
        data_axis=request.data_axis,
        weights=tuple(by_path[v.path] for v in variables if v.path in by_path),
        expert_axis=request.expert_axis,
        fsdp_axis=request.fsdp_axis,
        context_axis=request.context_axis,
        policy=request.policy,
        tokens_per_step=request.tokens_per_step,
    )
    check_strict(plan, request)
    return plan


def _resolve_matched(matched, request):
    """The `WeightPlan`s of the `(variable, rule)` pairs, in order."""
    preferred = {
        variable.path: preferred_placement(variable, rule, request)
        for variable, rule in matched
    }
    # The axes that shard each layer's kernels as their rules prefer: a
    # replicated weight beside them costs an all-reduce of its gradient.
    layer_axes = collections.defaultdict(set)
    for variable, _ in matched:
        if len(variable.shape) >= 2:
            spec = preferred[variable.path][0].spec
            layer_axes[layer_of(variable.path)].update(
                axis for entry in spec for axis in entry_axes(entry)
            )
    return [
        _resolve_weight(
            variable,
            rule,
            request,
            preferred[variable.path],
            frozenset(layer_axes[layer_of(variable.path)]),
        )
        for variable, rule in matched
    ]


def _resolve_weight(variable, rule, request, preferred, neighbours):
    """The `WeightPlan` of a weight its rule matched.

    Args:
        preferred: `(chosen, tried)` from `preferred_placement`.
        neighbours: the axes that shard the other kernels of its layer.
    """
    # The layer's own names when the rule gives none.
    dim_names = rule.dim_names or variable.dim_names
    shape = variable.shape
    dtype = request.dtype_of(variable)
    if rule.declares_replicated:
        return WeightPlan(
            path=variable.path,
            shape=shape,
            dtype=dtype,
            spec=(None,) * len(shape),
            shard_shape=shape,
            decision=REPLICATED,
            reason=f"declared replicated by {rule.owner}",
            rule=rule.pattern,
            dim_names=dim_names,
        )
    chosen, tried = preferred
    spec, fallbacks, moved = chosen.spec, chosen.fallbacks, chosen.moved
    estimates, choice_reason = (), None
    if fallbacks:
        options = candidates(
            chosen.alternative,
            shape,
            request.mesh.axis_sizes,
            spec,
            fallbacks,
            dim_names,
            flat_heads=variable.flat_heads,
        )
        if len(options) > 1:
            picked, choice_reason, estimates = _choose(
                options, shape, dtype, dim_names, request, neighbours
            )
            spec, extra_moved, fallbacks, _ = options[picked]
            moved = moved + extra_moved
    decision, reason = _decision(rule, chosen, tried, spec, fallbacks, moved)
    if choice_reason:
        reason += f"; {choice_reason}"
    return WeightPlan(
        path=variable.path,
        shape=shape,
        dtype=dtype,
        spec=spec,
        shard_shape=shard_shape(shape, spec, request.mesh.axis_sizes),
        decision=decision,
        reason=reason,
        rule=rule.pattern,
        fallbacks=fallbacks,
        moved=moved,
        dim_names=dim_names,
        candidates=estimates,
    )


def _choose(options, shape, dtype, dim_names, request, neighbours):
    """The policy's pick among `candidates`' options, by estimated cost.

    Returns:
        `(index, reason, estimates)`: the option picked, why, and every
        option's `Estimate` with `chosen` set on the pick.
    """
    axis_sizes, costs = request.mesh.axis_sizes, request.costs
    estimates = [
        estimate(
            shape,
            dtype,
            option_spec,
            dim_names,
            axis_sizes,
            request.token_axes,
            costs,
            sharded_neighbours=neighbours,
            label=label,
            fsdp_axes=request.fsdp_axes,
        )
        for option_spec, _, _, label in options
    ]
    picked, reason = choose(estimates, request.policy)
    estimates = tuple(
        dataclasses.replace(e, chosen=i == picked)
        for i, e in enumerate(estimates)
    )
    return picked, reason, estimates


def _decision(rule, chosen, tried, spec, fallbacks, moved):
    """The decision and its reason, in words, for a resolved weight."""
    rejected = [
        f"{format_spec(c.alternative)} does not divide ("
        + "; ".join(f.short() for f in c.fallbacks)
        + ")"
        for c in tried
        if c is not chosen and c.fallbacks
    ]
    if fallbacks:
        decision = FALLBACK
        reason = "; ".join(f.describe() for f in fallbacks)
        if rejected:
            reason += "; alternatives " + ", ".join(rejected)
    elif chosen.index > 0:
        decision = ALTERNATIVE
        reason = (
            f"alternative {chosen.index + 1} "
            f"{format_spec(chosen.alternative)} of {rule.owner}'s rule, "
            "since " + ", ".join(rejected)
        )
    else:
        decision = SHARDED
        reason = f"{rule.owner} rule {format_spec(chosen.alternative)}"
    if moved and not fallbacks:
        decision = ALTERNATIVE
        reason += "; " + "; ".join(
            f"{f.short()}, so '{f.axis}' shards dim "
            f"{_dim_of_axis(spec, f.axis)} instead"
            for f in moved
        )
    return decision, reason


def _dim_of_axis(spec, axis):
    return next(
        dim for dim, entry in enumerate(spec) if axis in entry_axes(entry)
    )
