"""Layout plans, the result of planning: every weight's placement,
explained, with memory totals.

`resolver` makes them; `plan_text` prints them and `plan_svg` draws them.
"""

import collections
import dataclasses
import json
import math

from keras_nlp.distribution.formatting import format_bytes
from keras_nlp.distribution.mesh import MeshShape
from keras_nlp.distribution.plan_svg import render_plan_svg
from keras_nlp.distribution.plan_text import entry_name
from keras_nlp.distribution.plan_text import folded_rows
from keras_nlp.distribution.plan_text import plan_title
from keras_nlp.distribution.plan_text import print_plan
from keras_nlp.distribution.rules import format_spec

_ITEMSIZE = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int16": 2,
    "uint16": 2,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "float32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
}

# Decisions a weight can get, in the words the plan reports them.
SHARDED = "sharded"
ALTERNATIVE = "alternative"
FALLBACK = "fallback"
REPLICATED = "replicated"
USER = "user"


def dtype_itemsize(dtype):
    """Bytes per element of a dtype name such as `"bfloat16"`."""
    name = str(dtype)
    if name not in _ITEMSIZE:
        raise ValueError(
            f"Unknown dtype {dtype!r} for a layout plan. Known dtypes: "
            f"{', '.join(sorted(_ITEMSIZE))}."
        )
    return _ITEMSIZE[name]


def spec_to_json(spec):
    return [
        list(entry) if isinstance(entry, tuple) else entry for entry in spec
    ]


@dataclasses.dataclass(frozen=True)
class Fallback:
    """A mesh axis dropped from one dimension because it does not divide it.

    Attributes:
        dim: index of the dimension.
        dim_size: its size.
        axis: the dropped mesh axis name.
        axis_size: the size of that axis.
        divisors: axis sizes that would divide `dim_size` (up to a bound).
        dim_name: what the dimension is (e.g. "kv_heads"), if its layer
            or rule named its dimensions.
        heads: for a flat dimension of concatenated heads, their `(count,
            size)` runs (see `declare_flat_heads`): the axis divides the
            dimension but would cut a head, and `divisors` are the axis
            sizes that cut only between heads.
    """

    dim: int
    dim_size: int
    axis: str
    axis_size: int
    divisors: tuple
    dim_name: str = None
    heads: tuple = None

    def _cuts_a_head(self):
        return self.heads is not None and self.dim_size % self.axis_size == 0

    def short(self):
        name = f"{self.dim_name}, " if self.dim_name else ""
        if self._cuts_a_head():
            heads = " + ".join(f"{c} heads of {s}" for c, s in self.heads)
            return (
                f"dim {self.dim} ({name}size {self.dim_size} = {heads}) "
                f"split by '{self.axis}' (size {self.axis_size}) would cut "
                "a head"
            )
        return (
            f"dim {self.dim} ({name}size {self.dim_size}) is not divisible "
            f"by '{self.axis}' (size {self.axis_size})"
        )

    def describe(self):
        divisors = ", ".join(str(d) for d in self.divisors)
        which = (
            "split it between heads"
            if self.heads is not None
            else f"divide {self.dim_size}"
        )
        return (
            f"{self.short()}, so it is replicated along '{self.axis}'; "
            f"axis sizes that {which}: {divisors}"
        )


@dataclasses.dataclass(frozen=True)
class WeightPlan:
    """The placement of one weight.

    Attributes:
        path: the variable path, as Keras's `LayoutMap` sees it.
        shape: the full shape.
        dtype: the dtype the bytes are counted in.
        spec: one mesh-axis entry per dimension (`None`, an axis name, or a
            tuple of axis names).
        shard_shape: the shape each device holds.
        decision: `"sharded"`, `"alternative"`, `"fallback"`,
            `"replicated"` or `"user"` (set by an entry of the user's on
            the layout map).
        reason: why, in words.
        rule: the regex (of a rule, or a user's layout map key) that
            matched, or `None`.
        fallbacks: the `Fallback`s behind a `"fallback"` decision.
        moved: `Fallback`s of axes that did not divide the dimension their
            rule put them on and shard a later dimension instead (e.g. the
            model axis on a feed-forward width, when it does not divide the
            number of experts); nothing is replicated along them.
        dim_names: what each dimension is (e.g. `("hidden", "heads",
            "head_dim")`), when its layer or rule names them.
        candidates: when an axis did not divide its dimension, the
            estimated cost of every placement considered (replicate along
            it, or each other dimension it could go to), as
            `keras_nlp.distribution.cost.Estimate`s with `chosen` set on
            the policy's pick; empty when there was no choice.
    """

    path: str
    shape: tuple
    dtype: str
    spec: tuple
    shard_shape: tuple
    decision: str
    reason: str
    rule: str = None
    fallbacks: tuple = ()
    moved: tuple = ()
    dim_names: tuple = None
    candidates: tuple = ()

    @property
    def params(self):
        return math.prod(self.shape)

    @property
    def shard_params(self):
        return math.prod(self.shard_shape)

    @property
    def bytes(self):
        return self.params * dtype_itemsize(self.dtype)

    @property
    def shard_bytes(self):
        return self.shard_params * dtype_itemsize(self.dtype)

    def to_dict(self):
        return {
            "path": self.path,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "spec": spec_to_json(self.spec),
            "shard_shape": list(self.shard_shape),
            "params": self.params,
            "bytes": self.bytes,
            "shard_bytes": self.shard_bytes,
            "decision": self.decision,
            "reason": self.reason,
            "rule": self.rule,
            "candidates": [c.to_dict() for c in self.candidates],
        }


@dataclasses.dataclass(frozen=True)
class LayoutPlan:
    """Where every weight of a backbone goes on a mesh, and what it costs.

    A plan is computed from the mesh *shape* alone: no devices and no weight
    allocation. Every device holds one shard of every weight, so the
    per-device totals are the sums of the shard sizes.

    Attributes:
        backbone: the backbone class name.
        config: the backbone config the plan was resolved for.
        mesh: the `MeshShape`.
        model_axis: the mesh axis name used for the `MODEL` role.
        data_axis: the mesh axis name used for the `DATA` role, or `None`.
        weights: a tuple of `WeightPlan`, in the model's weight order.
        preset: the preset name, when the plan was made from one.
        expert_axis: the mesh axis name of the `EXPERT` role, or `None`
            when experts share the model axis.
        fsdp_axis: the mesh axis that shards weights FSDP-style, or `None`
            when the data axis does.
        context_axis: the mesh axis that splits the sequence (context
            parallelism), or `None`.
        policy: `"auto"`, `"memory"` or `"communication"`: how axes that
            do not divide a dimension were placed, see `get_layout_map`.
        tokens_per_step: the tokens per step the candidates' costs were
            estimated for.
        activations: a tuple of `ActivationPlan`: the layer outputs whose
            layouts are pinned (see `keras_nlp.distribution.activations`).
        kv_caches: a tuple of `CachePlan`: the layout of each attention's
            key/value cache while generating, for decoder backbones (see
            `keras_nlp.distribution.kv_cache`).
        sequence_parallel: `(enabled, reason)`: whether the residual
            stream is split over the sequence on the model axis (see
            `keras_nlp.distribution.cost.choose_sequence_parallel`).

    Example:

    ```python
    import keras_nlp

    plan = keras_nlp.models.GemmaBackbone.plan_layout(
        {"batch": 1, "model": 2}, preset="gemma_2b_en"
    )
    plan.weight("decoder_block_0/attention/key/kernel").spec
    # (None, "batch", None)
    print(plan.memory_ratio)  # per-device parameters / ideal
    ```
    """

    backbone: str
    config: dict
    mesh: MeshShape
    model_axis: str
    data_axis: str
    weights: tuple
    preset: str = None
    expert_axis: str = None
    fsdp_axis: str = None
    policy: str = "auto"
    tokens_per_step: int = None
    activations: tuple = ()
    kv_caches: tuple = ()
    sequence_parallel: tuple = (False, None)
    context_axis: str = None

    @property
    def batch_axes(self):
        """The mesh axes that split the batch: the data and fsdp axes."""
        return tuple(a for a in (self.data_axis, self.fsdp_axis) if a)

    @property
    def token_axes(self):
        """The mesh axes that split the tokens: the batch axes and the
        context axis."""
        return self.batch_axes + (
            (self.context_axis,) if self.context_axis else ()
        )

    def weight(self, path):
        """The `WeightPlan` of the variable at `path`."""
        for weight in self.weights:
            if weight.path == path:
                return weight
        raise KeyError(
            f"No weight with path {path!r} in the {self.backbone} plan. "
            f"Example paths: {[w.path for w in self.weights[:3]]}."
        )

    def explain(self, path):
        """One line on where the weight at `path` goes and why."""
        weight = self.weight(path)
        return (
            f"{weight.path} {weight.shape} -> {format_spec(weight.spec)}"
            f", shard {weight.shard_shape}: {weight.decision}; "
            f"{weight.reason}"
        )

    @property
    def num_devices(self):
        return self.mesh.num_devices

    @property
    def dtypes(self):
        return sorted({weight.dtype for weight in self.weights})

    @property
    def total_params(self):
        return sum(weight.params for weight in self.weights)

    @property
    def total_bytes(self):
        return sum(weight.bytes for weight in self.weights)

    @property
    def params_per_device(self):
        return sum(weight.shard_params for weight in self.weights)

    @property
    def bytes_per_device(self):
        return sum(weight.shard_bytes for weight in self.weights)

    @property
    def ideal_params_per_device(self):
        return self.total_params / self.num_devices

    @property
    def ideal_bytes_per_device(self):
        return self.total_bytes / self.num_devices

    @property
    def memory_ratio(self):
        """Per-device parameter bytes over the ideal (total / devices)."""
        return self.bytes_per_device / self.ideal_bytes_per_device

    @property
    def replicated_bytes_fraction(self):
        """Share of the model's bytes in weights held whole on every device.

        Always 0 on a single device, where nothing is replicated.
        """
        if self.num_devices == 1 or not self.total_bytes:
            return 0.0
        whole = sum(
            weight.bytes
            for weight in self.weights
            if weight.shard_shape == weight.shape
        )
        return whole / self.total_bytes

    @property
    def fallbacks(self):
        """Weights whose rule could not be applied as written."""
        return tuple(w for w in self.weights if w.decision == FALLBACK)

    def to_dict(self):
        return {
            "backbone": self.backbone,
            "preset": self.preset,
            "config": _jsonable(self.config),
            "mesh": self.mesh.axis_sizes,
            "model_axis": self.model_axis,
            "data_axis": self.data_axis,
            "expert_axis": self.expert_axis,
            "fsdp_axis": self.fsdp_axis,
            "context_axis": self.context_axis,
            "policy": self.policy,
            "tokens_per_step": self.tokens_per_step,
            "dtypes": self.dtypes,
            "num_devices": self.num_devices,
            "total_params": self.total_params,
            "total_bytes": self.total_bytes,
            "max_params_per_device": self.params_per_device,
            "max_bytes_per_device": self.bytes_per_device,
            "ideal_params_per_device": self.ideal_params_per_device,
            "ideal_bytes_per_device": self.ideal_bytes_per_device,
            "memory_ratio": self.memory_ratio,
            "replicated_bytes_fraction": self.replicated_bytes_fraction,
            "num_fallbacks": len(self.fallbacks),
            "weights": [weight.to_dict() for weight in self.weights],
            "sequence_parallel": {
                "enabled": self.sequence_parallel[0],
                "reason": self.sequence_parallel[1],
            },
            "activations": [
                activation.to_dict() for activation in self.activations
            ],
            "kv_caches": [
                {
                    "path": cache.path,
                    "kv_heads": cache.kv_heads,
                    "head_dim": cache.head_dim,
                    "spec": spec_to_json(cache.spec),
                    "length_axes": list(cache.length_axes),
                    "reason": cache.reason,
                }
                for cache in self.kv_caches
            ],
        }

    def to_json(self, **kwargs):
        return json.dumps(self.to_dict(), **kwargs)

    def summary(self):
        """The totals as a few lines of text."""
        # A preset is named with its class; a plain class once.
        name = (
            f"{self.preset} ({self.backbone})" if self.preset else self.backbone
        )
        lines = [
            f"{name} on mesh {self.mesh}",
            f"devices, dtype:        {self.num_devices}, "
            f"{'/'.join(self.dtypes)}",
            f"total parameters:      {self.total_params:,} "
            f"({format_bytes(self.total_bytes)})",
            f"parameters per device: {self.params_per_device:,} "
            f"({format_bytes(self.bytes_per_device)})",
            f"ideal per device:      {self.ideal_params_per_device:,.0f} "
            f"({format_bytes(self.ideal_bytes_per_device)}), "
            f"ratio {self.memory_ratio:.3f}",
            f"bytes replicated:      {self.replicated_bytes_fraction:.1%} "
            "of the model is held whole on every device",
            f"fallbacks:             {len(self.fallbacks)} weight(s)",
        ]
        if self.activations:
            kinds = collections.Counter(
                a.reason.split(":")[0] for a in self.activations
            )
            lines.append(
                f"activations pinned:    {len(self.activations)} layer "
                "outputs ("
                + ", ".join(f"{count} {kind}" for kind, count in kinds.items())
                + ")"
            )
        if self.sequence_parallel[0]:
            lines.append(f"sequence parallel:     {self.sequence_parallel[1]}")
        if self.kv_caches:
            layouts = collections.Counter(
                "(kv_heads, head_dim) on " + format_spec(cache.spec[3:])
                if cache.spec[3:] != (None, None)
                else "length on " + ", ".join(cache.length_axes)
                if cache.length_axes
                else "whole on every device"
                for cache in self.kv_caches
            )
            lines.append(
                f"kv caches:             {len(self.kv_caches)} attention(s), "
                + ", ".join(f"{n} {text}" for text, n in layouts.items())
                + "; batch on the batch axes"
            )
        return "\n".join(lines)

    def __str__(self):
        return self.summary()

    def grouped_rows(self):
        """Rows that fold repeated blocks (`decoder_block_{i}`) into one.

        Returns:
            A list of `(path_template, count, WeightPlan)`.
        """
        return [row[:3] for row in folded_rows(self.weights)]

    def print(self, console=None, all_weights=False):
        """Prints the plan, then its totals, with `rich`.

        Where every name fits whole beside room for the reasons: a table
        of every weight kind's path, count, shape, spec, shard shape,
        bytes per device and decision. Otherwise one entry per weight
        kind: its name within its block, the blocks it repeats in folded
        into a range (`attention/key/kernel  decoder_block 0-17`) and its
        bytes per device, then its spec, shard shape and decision with
        the reason, wrapped to the width under an indent. Weight names
        are never cut. Sizes are per device, summed over the blocks shown.

        Args:
            console: an optional `rich.console.Console`; by default the
                terminal's width, else `COLUMNS`, else 100 columns.
            all_weights: bool. List every weight instead of folding
                repeated blocks into one row.
        """
        print_plan(self, console=console, all_weights=all_weights)

    def to_svg(self, all_weights=False):
        """The plan as a standalone SVG picture.

        One row per weight kind (or per weight with `all_weights`): its
        name and the blocks it repeats in, a grid with one square per
        device laid out like the mesh, colored by which piece of the
        weight the device holds (gray: the whole weight), and its spec,
        shard shape, bytes per device and decision. `python -m keras_nlp
        plan PRESET --mesh 1x8 --svg plan.svg` writes it.

        Returns:
            str, the SVG document.
        """
        if all_weights:
            rows = [(weight.path, 1, weight) for weight in self.weights]
        else:
            rows = [
                (entry_name(template, indices), count, weight)
                for template, count, weight, indices in folded_rows(
                    self.weights
                )
            ]
        return render_plan_svg(self, rows, plan_title(self))


def _jsonable(value):
    return json.loads(json.dumps(value, default=str))
