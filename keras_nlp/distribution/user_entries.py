"""Layouts a user sets on the layout map, which override the rules."""

import dataclasses
import math
import re

from keras_nlp.distribution.layout_plan import USER
from keras_nlp.distribution.layout_plan import WeightPlan
from keras_nlp.distribution.placement import shard_shape
from keras_nlp.distribution.rules import entry_axes
from keras_nlp.distribution.rules import format_spec


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


def user_weight_plan(variable, entry, mesh, dtype):
    """`(WeightPlan, None)` for a user's entry, or `(None, problem)`.

    The entry is checked as a rule would be: its rank, its mesh axes (each
    on one dimension at most) and that every dimension divides.
    """
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
        shard_shape=shard_shape(shape, entry.spec, axis_sizes),
        decision=USER,
        reason=f"set on the layout map by the user (key {entry.key!r})",
        rule=entry.key,
    )
    return weight, None
