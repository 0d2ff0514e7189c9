"""Resolving a backbone's layout rules against real shapes and a mesh.

This is the one place that decides where weights go. Rules name roles per
dimension; here each role becomes a mesh axis, and an axis is kept on a
dimension only if its size divides the dimension. A rule's alternatives are
tried in order; if none divides, the axes that do not divide are dropped.
A dropped axis then has candidates: replicate the weight along it, or put
it on another dimension the rule gives a role to and that it divides; the
policy picks one by the estimated costs of `keras_nlp.distribution.cost`.
An axis is never put on a dimension its rule did not name, so heads are
never split and head_dim is never sharded as a fallback.
"""

import collections
import dataclasses
import math
import re

from keras_nlp.distribution.cost import DEFAULT_TOKENS_PER_STEP
from keras_nlp.distribution.cost import UNSPLIT_DIMS
from keras_nlp.distribution.cost import CostModel
from keras_nlp.distribution.cost import check_tokens_per_step
from keras_nlp.distribution.cost import choose
from keras_nlp.distribution.cost import estimate
from keras_nlp.distribution.cost import layer_of
from keras_nlp.distribution.plan import ALTERNATIVE
from keras_nlp.distribution.plan import FALLBACK
from keras_nlp.distribution.plan import REPLICATED
from keras_nlp.distribution.plan import SHARDED
from keras_nlp.distribution.plan import USER
from keras_nlp.distribution.plan import Fallback
from keras_nlp.distribution.plan import LayoutPlan
from keras_nlp.distribution.plan import WeightPlan
from keras_nlp.distribution.plan import dtype_itemsize
from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import entry_axes
from keras_nlp.distribution.rules import format_spec
from keras_nlp.distribution.rules import role_axes_for

_MAX_LISTED = 12
# Variables that Keras's `enable_lora` adds next to a layer's `kernel`.
LORA_ADAPTERS = ("lora_kernel_a", "lora_kernel_b")


def _adapter_kernel_path(path):
    """The kernel path of a LoRA adapter path, or `None` for other paths."""
    prefix, _, name = path.rpartition("/")
    return f"{prefix}/kernel" if name in LORA_ADAPTERS else None


def _derive_adapter(variable, kernel, mesh, dtype):
    """An adapter's plan from its kernel's: shared dims keep their axes.

    Keras's `lora_kernel_a` has the kernel's shape with the last dimension
    replaced by the rank; `lora_kernel_b` is `(rank, last kernel dim)`. The
    rank dimension is replicated.
    """
    if variable.path.endswith("lora_kernel_a"):
        spec = kernel.spec[:-1] + (None,)
    else:
        spec = (None, kernel.spec[-1])
    return WeightPlan(
        path=variable.path,
        shape=variable.shape,
        dtype=dtype,
        spec=spec,
        shard_shape=_shard_shape(variable.shape, spec, mesh.axis_sizes),
        decision=SHARDED if any(spec) else REPLICATED,
        reason=(
            f"LoRA adapter of a kernel laid out {format_spec(kernel.spec)}: "
            "shared dimensions keep the kernel's axes, the rank is "
            "replicated"
        ),
    )


class LayoutError(ValueError):
    """A layout plan cannot be made, or the built model does not follow it."""


@dataclasses.dataclass(frozen=True)
class UserEntry:
    """A layout a user set on the layout map, which overrides the rules.

    Attributes:
        key: the map key: a regex matched with `re.fullmatch`, or an exact
            variable path.
        spec: one mesh-axis entry per dimension (`None`, an axis name or a
            tuple of axis names).
    """

    key: str
    spec: tuple

    def matches(self, path):
        return re.fullmatch(self.key, path) is not None


def _user_weight(variable, entry, mesh, dtype):
    """`(WeightPlan, None)` for a user's entry, or `(None, problem)`."""
    shape = variable.shape
    where = f"layout map entry {entry.key!r} {format_spec(entry.spec)}"
    if len(entry.spec) != len(shape):
        return None, (
            f"{where} has {len(entry.spec)} entries, but {variable.path} "
            f"has shape {shape} (rank {len(shape)})"
        )
    axis_sizes = mesh.axis_sizes
    used = [axis for axes in entry.spec for axis in entry_axes(axes)]
    unknown = sorted(set(used) - set(axis_sizes))
    if unknown:
        return None, (
            f"{where} names {unknown}, which are not axes of the mesh "
            f"{list(axis_sizes)}"
        )
    if len(set(used)) != len(used):
        return None, f"{where} uses a mesh axis on two dimensions"
    for dim, (dim_size, axes) in enumerate(zip(shape, entry.spec, strict=True)):
        divisor = math.prod(axis_sizes[axis] for axis in entry_axes(axes))
        if dim_size % divisor:
            return None, (
                f"{where}: dim {dim} of {variable.path} {shape} (size "
                f"{dim_size}) is not divisible by {format_spec((axes,))} "
                f"(size {divisor})"
            )
    weight = WeightPlan(
        path=variable.path,
        shape=shape,
        dtype=dtype,
        spec=entry.spec,
        shard_shape=_shard_shape(shape, entry.spec, axis_sizes),
        decision=USER,
        reason=f"set on the layout map by the user (key {entry.key!r})",
        rule=entry.key,
    )
    return weight, None


def _divisors(size, bound):
    return tuple(d for d in range(1, min(size, bound) + 1) if size % d == 0)


POLICIES = ("auto", "memory", "communication")


def check_policy(policy):
    """Raises a `ValueError` unless `policy` is one of `POLICIES`."""
    if policy not in POLICIES:
        raise ValueError(
            f"policy must be one of {', '.join(map(repr, POLICIES))}. "
            f"Received: policy={policy!r}."
        )


def _place(
    alternative,
    shape,
    role_axes,
    axis_sizes,
    divisor_bound,
    dim_names=None,
):
    """Maps one role spec onto mesh axes for `shape`.

    A mesh axis shards one dimension at most: where two roles share an axis
    (`EXPERT` on the model axis when the mesh has no expert axis, or `DATA`
    covering the expert axis), the earlier dimension takes it. An axis that
    does not divide its dimension is dropped there, and may then shard a
    later dimension whose role names it. Where else an axis that shards
    nothing could go is `_candidates`' job.

    Returns:
        `(spec, fallbacks, moved)`: the mesh-axis spec, the `Fallback`s of
        axes that shard nothing (the weight is replicated along them), and
        those of axes dropped from one dimension but sharding another.
    """
    spec = []
    dropped = []
    used = set()
    for dim, (entry, dim_size) in enumerate(
        zip(alternative, shape, strict=True)
    ):
        axes = []
        for role in entry_axes(entry):
            for axis in role_axes[role]:
                if axis is not None and axis not in axes and axis not in used:
                    axes.append(axis)
        while axes and dim_size % math.prod(axis_sizes[a] for a in axes):
            # Drop the last-named axis first: rules list the axes that
            # matter most first.
            axis = axes.pop()
            dropped.append(
                Fallback(
                    dim=dim,
                    dim_size=dim_size,
                    axis=axis,
                    axis_size=axis_sizes[axis],
                    divisors=_divisors(dim_size, divisor_bound),
                    dim_name=dim_names[dim] if dim_names else None,
                )
            )
        used.update(axes)
        spec.append(axes)
    spec = [
        None if not axes else axes[0] if len(axes) == 1 else tuple(axes)
        for axes in spec
    ]
    fallbacks = tuple(f for f in dropped if f.axis not in used)
    moved = tuple(f for f in dropped if f.axis in used)
    return tuple(spec), fallbacks, moved


def _candidates(alternative, shape, axis_sizes, spec, fallbacks, dim_names):
    """Where the axes that shard nothing could go instead of replicating.

    Each axis in `fallbacks` stays off the weight (replicated along it) or
    joins, after that dimension's own axes, one other dimension that the
    rule gives a role to, that is not a head_dim, and that it divides
    together with the axes already there. Heads stay whole: a dimension
    only ever takes axes that divide it.

    Returns:
        A list of `(spec, moved, fallbacks, label)`, replication first:
        `moved` are the `Fallback`s of the axes placed elsewhere,
        `fallbacks` those still replicated.
    """
    found = [([list(entry_axes(e)) for e in spec], (), (), [])]
    for fallback in fallbacks:
        grown = []
        for axes, moved, kept, words in found:
            grown.append(
                (
                    axes,
                    moved,
                    kept + (fallback,),
                    words + [f"replicate along '{fallback.axis}'"],
                )
            )
            for dim, (entry, dim_size) in enumerate(
                zip(alternative, shape, strict=True)
            ):
                name = dim_names[dim] if dim_names else None
                if entry is None or dim == fallback.dim or name in UNSPLIT_DIMS:
                    continue
                placed = axes[dim] + [fallback.axis]
                if dim_size % math.prod(axis_sizes[a] for a in placed):
                    continue
                where = f"dim {dim}" + (f" ({name})" if name else "")
                grown.append(
                    (
                        [placed if d == dim else a for d, a in enumerate(axes)],
                        moved + (fallback,),
                        kept,
                        words + [f"'{fallback.axis}' on {where}"],
                    )
                )
        found = grown
    return [
        (
            tuple(
                None if not a else a[0] if len(a) == 1 else tuple(a)
                for a in axes
            ),
            moved,
            kept,
            ", ".join(words),
        )
        for axes, moved, kept, words in found
    ]


def _shard_shape(shape, spec, axis_sizes):
    return tuple(
        dim_size // math.prod(axis_sizes[axis] for axis in entry_axes(entry))
        for dim_size, entry in zip(shape, spec, strict=True)
    )


# One way of applying a rule: which alternative, and what it came to.
_Candidate = collections.namedtuple(
    "_Candidate", ["index", "alternative", "spec", "fallbacks", "moved"]
)


def _preferred(variable, rule, role_axes, axis_sizes, divisor_bound):
    """The rule's placement before any dropped axis moves.

    Returns:
        `(chosen, tried)`: the `_Candidate` of the first alternative that
        divides (or, if none does, the one that shards the most) and every
        `_Candidate` tried.
    """
    shape = variable.shape
    dim_names = rule.dim_names or variable.dim_names
    tried = []
    for index, alternative in enumerate(rule.alternatives):
        spec, fallbacks, moved = _place(
            alternative,
            shape,
            role_axes,
            axis_sizes,
            divisor_bound,
            dim_names=dim_names,
        )
        tried.append(_Candidate(index, alternative, spec, fallbacks, moved))
        if not fallbacks:
            break
    chosen = tried[-1]
    if chosen.fallbacks:
        # No alternative divides fully: keep the one that shards the most,
        # the earliest on a tie.
        chosen = min(
            tried,
            key=lambda c: (
                math.prod(_shard_shape(shape, c.spec, axis_sizes)),
                c.index,
            ),
        )
    return chosen, tried


def _resolve_weight(variable, rule, mesh, dtype, preferred, costing):
    """The `WeightPlan` of a weight its rule matched.

    Args:
        preferred: `(chosen, tried)` from `_preferred`.
        costing: dict with the policy, the `CostModel`, the batch and fsdp
            axes, and the axes that shard the weight's neighbours.
    """
    axis_sizes = mesh.axis_sizes
    # The layer's own names when the rule gives none.
    dim_names = rule.dim_names or variable.dim_names
    shape = variable.shape
    if rule.declares_replicated:
        spec = (None,) * len(shape)
        return WeightPlan(
            path=variable.path,
            shape=shape,
            dtype=dtype,
            spec=spec,
            shard_shape=shape,
            decision=REPLICATED,
            reason=f"declared replicated by {rule.owner}",
            rule=rule.pattern,
            dim_names=dim_names,
        )
    chosen, tried = preferred
    index, alternative, spec, fallbacks, moved = chosen
    estimates = ()
    choice_reason = None
    if fallbacks:
        options = _candidates(
            alternative, shape, axis_sizes, spec, fallbacks, dim_names
        )
        if len(options) > 1:
            estimates = [
                estimate(
                    shape,
                    dtype,
                    option_spec,
                    dim_names,
                    axis_sizes,
                    costing["batch_axes"],
                    costing["model"],
                    sharded_neighbours=costing["neighbours"],
                    label=label,
                    fsdp_axes=costing["fsdp_axes"],
                )
                for option_spec, _, _, label in options
            ]
            picked, choice_reason = choose(estimates, costing["policy"])
            spec, extra_moved, fallbacks, _ = options[picked]
            moved = moved + extra_moved
            estimates = tuple(
                dataclasses.replace(e, chosen=i == picked)
                for i, e in enumerate(estimates)
            )
    shard_shape = _shard_shape(shape, spec, axis_sizes)
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
    elif index > 0:
        decision = ALTERNATIVE
        reason = (
            f"alternative {index + 1} {format_spec(alternative)} of "
            f"{rule.owner}'s rule, since " + ", ".join(rejected)
        )
    else:
        decision = SHARDED
        reason = f"{rule.owner} rule {format_spec(alternative)}"
    if moved and not fallbacks:
        decision = ALTERNATIVE
        reason += "; " + "; ".join(
            f"{f.short()}, so '{f.axis}' shards dim "
            f"{_dim_of_axis(spec, f.axis)} instead"
            for f in moved
        )
    if choice_reason:
        reason += f"; {choice_reason}"
    return WeightPlan(
        path=variable.path,
        shape=shape,
        dtype=dtype,
        spec=spec,
        shard_shape=shard_shape,
        decision=decision,
        reason=reason,
        rule=rule.pattern,
        fallbacks=fallbacks,
        moved=moved,
        dim_names=dim_names,
        candidates=estimates,
    )


def _dim_of_axis(spec, axis):
    return next(
        dim for dim, entry in enumerate(spec) if axis in entry_axes(entry)
    )


def bullet_list(lines):
    """Indented `- ` lines, cut after a dozen, for error messages."""
    shown = lines[:_MAX_LISTED]
    text = "\n".join(f"  - {line}" for line in shown)
    if len(lines) > _MAX_LISTED:
        text += f"\n  ... and {len(lines) - _MAX_LISTED} more"
    return text


def resolve_layout(
    rules,
    variables,
    mesh,
    *,
    model_axis,
    data_axis,
    owner,
    expert_axis=None,
    fsdp_axis=None,
    config=None,
    preset=None,
    dtype=None,
    strict=False,
    user_entries=(),
    policy="auto",
    tokens_per_step=DEFAULT_TOKENS_PER_STEP,
    cost_model=None,
):
    """Resolves layout rules against variables and a mesh into a plan.

    Args:
        rules: list of `LayoutRule` (see `normalize_rules`).
        variables: the model's `VariableInfo`s (see `abstract_variables`).
        mesh: a `MeshShape`.
        model_axis: mesh axis name for the `MODEL` role.
        data_axis: mesh axis name for the `DATA` role, or `None` to shard
            no weight on the data axis.
        owner: the backbone class name, for messages.
        expert_axis: mesh axis name for the `EXPERT` role, or `None` to
            put experts on the model axis. Weights with no expert dimension
            also shard their `DATA` dimensions over it.
        fsdp_axis: mesh axis name that shards the `DATA` (FSDP) dimensions
            of weights instead of the data axis, or `None`.
        config: the config the variables come from, kept in the plan.
        preset: the preset name, if any, kept in the plan.
        dtype: optional dtype name to count bytes in; defaults to each
            variable's own dtype.
        strict: bool. If `True`, any fallback raises `LayoutError`.
        user_entries: `UserEntry`s set on the layout map; each takes
            precedence over the rules for the variables it matches.
        policy: how to place an axis that does not divide the dimension
            its rule puts it on. The candidates are replicating the weight
            along it and putting it on each other dimension the rule gives
            a role to, where it divides (see `_candidates`), scored by
            `keras_nlp.distribution.cost.estimate`: `"auto"` (the default)
            takes the lowest estimated step time, `"memory"` the fewest
            bytes per device (then the fewest collective bytes),
            `"communication"` the fewest collective bytes (then the fewest
            bytes per device).
        tokens_per_step: int, tokens of one training step over all devices,
            which the collectives' estimates scale with. Defaults to
            `8 * 2048`.
        cost_model: an optional `keras_nlp.distribution.cost.CostModel`
            for the other assumptions (training, optimizer moments,
            bandwidths); its `tokens_per_step` is replaced by the argument.

    Returns:
        A `LayoutPlan`.

    Raises:
        LayoutError: if a variable of rank >= 2 matches no rule, a variable
            matches two rules, a rule's rank or dimension names differ from
            its variable's, a rule matches no variable, a user entry is
            invalid for what it matches or matches nothing, or (`strict`) a
            rule cannot be applied as written or the expert axis does not
            divide an expert dimension.
    """
    check_policy(policy)
    check_tokens_per_step(tokens_per_step)
    cost_model = dataclasses.replace(
        cost_model or CostModel(), tokens_per_step=tokens_per_step
    )
    if dtype is not None:
        dtype_itemsize(dtype)  # fail now, naming the dtype, not when printed
    role_axes = role_axes_for(model_axis, data_axis, expert_axis, fsdp_axis)
    divisor_bound = max(64, mesh.num_devices)
    hits = {rule.pattern: 0 for rule in rules}
    weights = []
    jobs = []
    adapters = []
    user_hits = {entry.key: 0 for entry in user_entries}
    problems = {
        "overlap": [],
        "rank": [],
        "orientation": [],
        "uncovered": [],
        "adapter": [],
        "user": [],
    }
    for variable in variables:
        weight_dtype = dtype or variable.dtype
        chosen = [e for e in user_entries if e.matches(variable.path)]
        if chosen:
            for entry in chosen:
                user_hits[entry.key] += 1
            if len(chosen) > 1:
                problems["user"].append(
                    f"{variable.path} matches the entries "
                    + ", ".join(repr(entry.key) for entry in chosen)
                )
                continue
            weight, problem = _user_weight(
                variable, chosen[0], mesh, weight_dtype
            )
            if problem:
                problems["user"].append(problem)
            else:
                weights.append(weight)
            continue
        matches = [rule for rule in rules if rule.matches(variable.path)]
        if _adapter_kernel_path(variable.path):
            # Adapters take their kernel's layout; a rule that also matches
            # them is a regex written too loosely.
            if matches:
                problems["adapter"].append(
                    f"{variable.path} matches "
                    + ", ".join(repr(rule.pattern) for rule in matches)
                )
            adapters.append(variable)
            continue
        if len(matches) > 1:
            problems["overlap"].append(
                f"{variable.path} matches "
                + ", ".join(repr(rule.pattern) for rule in matches)
            )
            continue
        if not matches:
            if len(variable.shape) >= 2:
                problems["uncovered"].append(
                    f"{variable.path} {variable.shape}"
                )
                continue
            weights.append(
                WeightPlan(
                    path=variable.path,
                    shape=variable.shape,
                    dtype=weight_dtype,
                    spec=(None,) * len(variable.shape),
                    shard_shape=variable.shape,
                    decision=REPLICATED,
                    reason="rank-1 weight (a norm scale or bias), kept whole",
                )
            )
            continue
        rule = matches[0]
        hits[rule.pattern] += 1
        if len(variable.shape) != rule.rank:
            problems["rank"].append(
                f"{variable.path} has shape {variable.shape} (rank "
                f"{len(variable.shape)}) but rule {rule.pattern!r} gives "
                f"{rule.rank} entries: {format_spec(rule.alternatives[0])}"
            )
            continue
        if (
            rule.dim_names
            and variable.dim_names
            and rule.dim_names != variable.dim_names
        ):
            problems["orientation"].append(
                f"rule {rule.pattern!r} names the dimensions of "
                f"{variable.path} {rule.dim_names}, but its layer creates "
                f"it as {variable.dim_names} (shape {variable.shape})"
            )
            continue
        jobs.append((variable, rule, weight_dtype))

    preferred = {
        variable.path: _preferred(
            variable, rule, role_axes, mesh.axis_sizes, divisor_bound
        )
        for variable, rule, _ in jobs
    }
    # The axes that shard each layer's kernels as their rules prefer.
    layer_axes = collections.defaultdict(set)
    for variable, _, _ in jobs:
        if len(variable.shape) >= 2:
            spec = preferred[variable.path][0].spec
            layer_axes[layer_of(variable.path)].update(
                axis for entry in spec for axis in entry_axes(entry)
            )
    batch_axes = tuple(a for a in (data_axis, fsdp_axis) if a is not None)
    for variable, rule, weight_dtype in jobs:
        costing = {
            "policy": policy,
            "model": cost_model,
            "batch_axes": batch_axes,
            "fsdp_axes": role_axes[DATA],
            "neighbours": frozenset(layer_axes[layer_of(variable.path)]),
        }
        weights.append(
            _resolve_weight(
                variable,
                rule,
                mesh,
                weight_dtype,
                preferred[variable.path],
                costing,
            )
        )

    by_path = {weight.path: weight for weight in weights}
    for variable in adapters:
        kernel = by_path.get(_adapter_kernel_path(variable.path))
        if kernel is None:
            problems["adapter"].append(
                f"{variable.path} has no planned kernel "
                f"{_adapter_kernel_path(variable.path)!r}"
            )
            continue
        by_path[variable.path] = _derive_adapter(
            variable, kernel, mesh, dtype or variable.dtype
        )
    weights = [by_path[v.path] for v in variables if v.path in by_path]

    unused = [pattern for pattern, count in hits.items() if count == 0]
    # A rule whose every variable a user entry took is not a typo.
    overridden = {
        rule.pattern
        for rule in rules
        for variable in variables
        if rule.matches(variable.path)
    }
    unused = [pattern for pattern in unused if pattern not in overridden]
    unused_entries = [key for key, count in user_hits.items() if not count]
    messages = []
    if problems["user"] or unused_entries:
        lines = problems["user"] + [
            f"entry {key!r} matches no variable of {owner}"
            for key in unused_entries
        ]
        messages.append(
            "Entries set on the layout map override the plan for the "
            "variables they match, but:\n"
            + bullet_list(lines)
            + "\nFix or delete these entries (del layout_map[key]); the "
            "plan lists every variable path."
        )
    if problems["orientation"]:
        messages.append(
            "A rule's dimension names must be its variable's, in the order "
            "its layer creates them; the spec is probably transposed:\n"
            + bullet_list(problems["orientation"])
            + "\nWrite the spec in the layer's order (or build it with "
            "keras_nlp.layers.layout_rules, which reads the layers' "
            "dimension names)."
        )
    if problems["adapter"]:
        messages.append(
            "LoRA adapter weights take the layout of their kernel and must "
            "match no layout rule (end kernel regexes with '/kernel'), but:\n"
            + bullet_list(problems["adapter"])
        )
    if problems["overlap"]:
        messages.append(
            "Each variable must match at most one layout rule, but:\n"
            + bullet_list(problems["overlap"])
        )
    if problems["rank"]:
        messages.append(
            "Layout rules must give one entry per dimension, but:\n"
            + bullet_list(problems["rank"])
        )
    if problems["uncovered"]:
        messages.append(
            "These variables of rank >= 2 match no layout rule and would be "
            "silently replicated on every device. Add a rule for them to "
            f"{owner}._layout_rules, or declare them replicated with an "
            "all-None spec:\n" + bullet_list(problems["uncovered"])
        )
    if unused:
        messages.append(
            f"These {owner} layout rules match no variable of this config "
            "(a typo, or a rule that only applies to other configs and "
            "should be returned conditionally):\n"
            + bullet_list([repr(pattern) for pattern in unused])
        )
    if messages:
        raise LayoutError(
            f"The layout rules of {owner} do not fit its variables.\n"
            + "\n".join(messages)
        )

    plan = LayoutPlan(
        backbone=owner,
        config=dict(config or {}),
        mesh=mesh,
        model_axis=model_axis,
        data_axis=data_axis,
        weights=tuple(weights),
        preset=preset,
        expert_axis=expert_axis,
        fsdp_axis=fsdp_axis,
        policy=policy,
        tokens_per_step=tokens_per_step,
    )
    if strict and plan.fallbacks:
        lines = [
            f"{weight.path} {weight.shape} -> "
            f"{format_spec(weight.spec)}: "
            + "; ".join(f.describe() for f in weight.fallbacks)
            for weight in plan.fallbacks
        ]
        raise LayoutError(
            f"strict=True: {len(plan.fallbacks)} {owner} weight(s) cannot be "
            f"sharded as their rules ask on mesh {mesh}:\n"
            + bullet_list(lines)
            + "\nChoose mesh axis sizes that divide these dimensions, or "
            "pass strict=False to accept replication along those axes."
        )
    if strict and expert_axis not in (None, model_axis):
        off_axis = [
            f"{weight.path} {weight.shape}: {f.short()}"
            for weight in plan.weights
            for f in weight.moved
            if f.axis == expert_axis
        ]
        if off_axis:
            raise LayoutError(
                f"strict=True: the expert axis '{expert_axis}' (size "
                f"{mesh.size(expert_axis)}) does not divide the experts of "
                f"{len(off_axis)} {owner} weight(s), so they would not be "
                "split by expert:\n"
                + bullet_list(off_axis)
                + "\nChoose an expert axis size that divides the number of "
                "experts, or pass strict=False to shard those weights "
                "along other dimensions instead."
            )
    return plan
