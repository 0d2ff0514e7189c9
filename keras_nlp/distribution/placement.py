"""Where a rule's roles put mesh axes on one weight: small pure functions.

An axis is kept on a dimension only if its size divides the dimension
(and, on a flat dimension of concatenated heads, cuts only between heads:
see `keras_nlp.distribution.dims.declare_flat_heads`). A rule's
alternatives are tried in order; if none divides, the axes that do not
divide are dropped. A dropped axis then has candidates: replicate the
weight along it, or put it on another dimension the rule gives a role to
and that it divides. An axis is never put on a dimension its rule did not
name, so heads are never split and head_dim is never sharded as a
fallback. Choosing among the candidates is the resolver's job.
"""

import collections
import math

from keras_nlp.distribution.cost import UNSPLIT_DIMS
from keras_nlp.distribution.dims import cuts_between_heads
from keras_nlp.distribution.layout_plan import REPLICATED
from keras_nlp.distribution.layout_plan import SHARDED
from keras_nlp.distribution.layout_plan import Fallback
from keras_nlp.distribution.layout_plan import WeightPlan
from keras_nlp.distribution.rules import entry_axes

# One way of applying a rule: which alternative, and what it came to.
Candidate = collections.namedtuple(
    "Candidate", ["index", "alternative", "spec", "fallbacks", "moved"]
)


def shard_shape(shape, spec, axis_sizes):
    """The shape each device holds of a weight of `shape` laid out `spec`."""
    return tuple(
        dim_size // math.prod(axis_sizes[axis] for axis in entry_axes(entry))
        for dim_size, entry in zip(shape, spec, strict=True)
    )


def derived_weight_plan(
    path, shape, dtype, spec, axis_sizes, reason, dim_names=None
):
    """The `WeightPlan` of a weight laid out from another's plan (a LoRA
    adapter, a quantization scale): sharded if any entry has axes."""
    shape, spec = tuple(shape), tuple(spec)
    return WeightPlan(
        path=path,
        shape=shape,
        dtype=dtype,
        spec=spec,
        shard_shape=shard_shape(shape, spec, axis_sizes),
        decision=SHARDED if any(spec) else REPLICATED,
        reason=reason,
        dim_names=dim_names,
    )


def splits(dim_size, shards, heads=None):
    """Whether `shards` equal parts of a dimension of `dim_size` keep its
    `heads` (`(count, size)` runs, or `None`) whole."""
    return dim_size % shards == 0 and cuts_between_heads(heads, shards)


def _divisors(size, bound, heads=None):
    return tuple(
        d for d in range(1, min(size, bound) + 1) if splits(size, d, heads)
    )


def _heads_of(flat_heads, dim):
    return flat_heads[dim] if flat_heads else None


def _as_spec(axes_per_dim):
    """Lists of axes per dimension as spec entries: None, a name or a tuple."""
    return tuple(
        None if not axes else axes[0] if len(axes) == 1 else tuple(axes)
        for axes in axes_per_dim
    )


def place_axes(alternative, shape, request, dim_names=None, flat_heads=None):
    """Maps one role spec onto the request's mesh axes for `shape`.

    A mesh axis shards one dimension at most: where two roles share an axis
    (`EXPERT` on the model axis when the mesh has no expert axis, or `DATA`
    covering the expert axis), the earlier dimension takes it. An axis that
    does not divide its dimension (or would cut one of the heads
    `flat_heads` gives it) is dropped there, and may then shard a later
    dimension whose role names it. Where else an axis that shards nothing
    could go is `candidates`' job.

    Returns:
        `(spec, fallbacks, moved)`: the mesh-axis spec, the `Fallback`s of
        axes that shard nothing (the weight is replicated along them), and
        those of axes dropped from one dimension but sharding another.
    """
    role_axes = request.role_axes
    axis_sizes = request.mesh.axis_sizes
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
        heads = _heads_of(flat_heads, dim)
        while axes and not splits(
            dim_size, math.prod(axis_sizes[a] for a in axes), heads
        ):
            # Drop the last-named axis first: rules list the axes that
            # matter most first.
            axis = axes.pop()
            dropped.append(
                Fallback(
                    dim=dim,
                    dim_size=dim_size,
                    axis=axis,
                    axis_size=axis_sizes[axis],
                    divisors=_divisors(dim_size, request.divisor_bound, heads),
                    dim_name=dim_names[dim] if dim_names else None,
                    heads=heads,
                )
            )
        used.update(axes)
        spec.append(axes)
    fallbacks = tuple(f for f in dropped if f.axis not in used)
    moved = tuple(f for f in dropped if f.axis in used)
    return _as_spec(spec), fallbacks, moved


def candidates(
    alternative, shape, axis_sizes, spec, fallbacks, dim_names, flat_heads=None
):
    """Where the axes that shard nothing could go instead of replicating.

    Each axis in `fallbacks` stays off the weight (replicated along it) or
    joins, after that dimension's own axes, one other dimension that the
    rule gives a role to, that is not a head_dim, and that it divides
    together with the axes already there. Heads stay whole: a dimension
    only ever takes axes that divide it, and a flat one (`flat_heads`)
    only axes that cut it between heads.

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
                if not splits(
                    dim_size,
                    math.prod(axis_sizes[a] for a in placed),
                    _heads_of(flat_heads, dim),
                ):
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
        (_as_spec(axes), moved, kept, ", ".join(words))
        for axes, moved, kept, words in found
    ]


def preferred_placement(variable, rule, request):
    """The rule's placement before any dropped axis moves.

    Returns:
        `(chosen, tried)`: the `Candidate` of the first alternative that
        divides (or, if none does, the one that shards the most) and every
        `Candidate` tried.
    """
    shape = variable.shape
    dim_names = rule.dim_names or variable.dim_names
    tried = []
    for index, alternative in enumerate(rule.alternatives):
        spec, fallbacks, moved = place_axes(
            alternative,
            shape,
            request,
            dim_names=dim_names,
            flat_heads=variable.flat_heads,
        )
        tried.append(Candidate(index, alternative, spec, fallbacks, moved))
        if not fallbacks:
            break
    chosen = tried[-1]
    if chosen.fallbacks:
        # No alternative divides fully: keep the one that shards the most,
        # the earliest on a tie.
        axis_sizes = request.mesh.axis_sizes
        chosen = min(
            tried,
            key=lambda c: (
                math.prod(shard_shape(shape, c.spec, axis_sizes)),
                c.index,
            ),
        )
    return chosen, tried
