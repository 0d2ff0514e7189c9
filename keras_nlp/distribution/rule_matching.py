"""Which rule or user entry decides each variable's layout, and coverage.

Every variable of rank >= 2 must match exactly one rule (or one entry a
user set on the layout map), every rule and entry must match a variable,
and a rule must agree with its variable's rank and dimension names. The
problems are collected by kind, so one `LayoutError` lists them all (see
`layout_errors`).
"""

import dataclasses

from keras_nlp.distribution.layout_errors import PROBLEM_KINDS
from keras_nlp.distribution.layout_plan import REPLICATED
from keras_nlp.distribution.layout_plan import WeightPlan
from keras_nlp.distribution.lora_adapters import adapter_kernel_path
from keras_nlp.distribution.rules import format_spec
from keras_nlp.distribution.user_entries import user_weight_plan


@dataclasses.dataclass
class Matching:
    """What decides each variable's layout.

    Attributes:
        planned: `WeightPlan`s needing no resolution: user entries' and
            rank-1 weights'.
        matched: `(variable, rule)` pairs, each to be resolved.
        adapters: the LoRA adapter variables, laid out like their kernels.
        problems: dict of problem kind -> lines (see `layout_errors`).
    """

    planned: list = dataclasses.field(default_factory=list)
    matched: list = dataclasses.field(default_factory=list)
    adapters: list = dataclasses.field(default_factory=list)
    problems: dict = dataclasses.field(
        default_factory=lambda: {kind: [] for kind in PROBLEM_KINDS}
    )


def match_variables(rules, variables, user_entries, request, owner):
    """Matches each variable to a user entry, a rule, or nothing.

    Args:
        rules: the backbone's `LayoutRule`s.
        variables: its `VariableInfo`s.
        user_entries: `UserEntry`s set on the layout map; each takes
            precedence over the rules for the variables it matches.
        request: the `PlanRequest` (mesh and dtype for user entries).
        owner: the backbone class name, for messages.

    Returns:
        A `Matching`.
    """
    matching = Matching()
    problems = matching.problems
    rule_hits = {rule.pattern: 0 for rule in rules}
    entry_hits = {entry.key: 0 for entry in user_entries}
    for variable in variables:
        entries = [e for e in user_entries if e.matches(variable.path)]
        if entries:
            for entry in entries:
                entry_hits[entry.key] += 1
            _plan_user_entry(variable, entries, request, matching)
            continue
        matches = [rule for rule in rules if rule.matches(variable.path)]
        if adapter_kernel_path(variable.path):
            # Adapters take their kernel's layout; a rule that also matches
            # them is a regex written too loosely.
            if matches:
                problems["adapter"].append(_matches_line(variable, matches))
            matching.adapters.append(variable)
            continue
        if len(matches) > 1:
            problems["overlap"].append(_matches_line(variable, matches))
            continue
        if not matches:
            _cover_unmatched(variable, request, matching)
            continue
        rule = matches[0]
        rule_hits[rule.pattern] += 1
        problem = _rule_misfit(variable, rule)
        if problem:
            problems[problem[0]].append(problem[1])
            continue
        matching.matched.append((variable, rule))
    problems["user"].extend(
        f"entry {key!r} matches no variable of {owner}"
        for key, count in entry_hits.items()
        if not count
    )
    # A rule whose every variable a user entry took is not a typo.
    overridden = {
        rule.pattern
        for rule in rules
        for variable in variables
        if rule.matches(variable.path)
    }
    problems["unused"] = [
        repr(pattern)
        for pattern, count in rule_hits.items()
        if not count and pattern not in overridden
    ]
    return matching


def _matches_line(variable, rules):
    return f"{variable.path} matches " + ", ".join(
        repr(rule.pattern) for rule in rules
    )


def _plan_user_entry(variable, entries, request, matching):
    """Plans `variable` by the one user entry that matches it."""
    if len(entries) > 1:
        matching.problems["user"].append(
            f"{variable.path} matches the entries "
            + ", ".join(repr(entry.key) for entry in entries)
        )
        return
    weight, problem = user_weight_plan(
        variable, entries[0], request.mesh, request.dtype_of(variable)
    )
    if problem:
        matching.problems["user"].append(problem)
    else:
        matching.planned.append(weight)


def _cover_unmatched(variable, request, matching):
    """A variable no rule matches: kept whole if rank 1, else a problem."""
    if len(variable.shape) >= 2:
        matching.problems["uncovered"].append(
            f"{variable.path} {variable.shape}"
        )
        return
    matching.planned.append(
        WeightPlan(
            path=variable.path,
            shape=variable.shape,
            dtype=request.dtype_of(variable),
            spec=(None,) * len(variable.shape),
            shard_shape=variable.shape,
            decision=REPLICATED,
            reason="rank-1 weight (a norm scale or bias), kept whole",
        )
    )


def _rule_misfit(variable, rule):
    """`(kind, line)` if `rule` cannot describe `variable`, else `None`."""
    if len(variable.shape) != rule.rank:
        return "rank", (
            f"{variable.path} has shape {variable.shape} (rank "
            f"{len(variable.shape)}) but rule {rule.pattern!r} gives "
            f"{rule.rank} entries: {format_spec(rule.alternatives[0])}"
        )
    if (
        rule.dim_names
        and variable.dim_names
        and rule.dim_names != variable.dim_names
    ):
        return "orientation", (
            f"rule {rule.pattern!r} names the dimensions of "
            f"{variable.path} {rule.dim_names}, but its layer creates "
            f"it as {variable.dim_names} (shape {variable.shape})"
        )
    return None
