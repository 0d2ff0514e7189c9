"""The conversion vocabulary between our variables and Hugging Face tensors.

A family's tensor table is a list of `Weight`s. Each says which of our
variables (a path, or a template such as
`transformer_layer_{i}/self_attention/query/kernel`) is which Hugging Face
tensor (`model.layers.{i}.self_attn.q_proj.weight`) and how one becomes the
other: a short chain of `ops`, written in the export direction (our tensor
-> theirs), that the importer runs backwards.

Every op does three things:

- `shape(ours)`: the shape it makes of a tensor of shape `ours`;
- `forward(value)`: the whole tensor converted (export);
- `source(box, shape)`: for a box (one `(start, stop)` per dimension) of
  its input, the box of its output holding those values, and a function
  that cuts that output piece back into the input box (import: a device
  reads only the bytes of its shard, converted on the fly).

So one table serves both directions, and a shard of ours is read from the
smallest box of the file that holds it (bounded, then cut in memory).
"""

import dataclasses
import math
import re
import string

import numpy as np


def _ravel(index, shape):
    flat = 0
    for i, size in zip(index, shape, strict=True):
        flat = flat * size + i
    return flat


def _grid_flat(box, shape):
    """Flat (row-major over `shape`) indices of every point of `box`."""
    ranges = [np.arange(start, stop) for start, stop in box]
    return np.ravel_multi_index(np.ix_(*ranges), shape)


class Op:
    """One step of a conversion, in the export direction (ours -> theirs)."""

    def shape(self, shape):
        raise NotImplementedError

    def forward(self, value):
        raise NotImplementedError

    def source(self, box, shape):
        """`(output box, cut)`: `cut(piece)` turns the output's values in
        that box into the input's values in `box`."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Transpose(Op):
    """Permutes dimensions like `numpy.transpose(value, axes)`; no `axes`
    reverses them (a `Dense` kernel `(in, out)` is PyTorch's `(out, in)`)."""

    axes: tuple = None

    def _axes(self, rank):
        return tuple(reversed(range(rank))) if self.axes is None else self.axes

    def shape(self, shape):
        return tuple(shape[a] for a in self._axes(len(shape)))

    def forward(self, value):
        return np.transpose(value, self._axes(value.ndim))

    def source(self, box, shape):
        axes = self._axes(len(shape))
        inverse = tuple(np.argsort(axes))
        return tuple(box[a] for a in axes), lambda p: np.transpose(p, inverse)


@dataclasses.dataclass(frozen=True)
class Merge(Op):
    """Flattens `count` dimensions from `axis` into one, row-major
    (our `(hidden, heads, head_dim)` kernel is their `(hidden, heads *
    head_dim)`)."""

    axis: int
    count: int = 2

    def _span(self, shape):
        return shape[self.axis : self.axis + self.count]

    def shape(self, shape):
        a, n = self.axis, self.count
        return shape[:a] + (math.prod(shape[a : a + n]),) + shape[a + n :]

    def forward(self, value):
        return np.reshape(value, self.shape(value.shape))

    def source(self, box, shape):
        a, n = self.axis, self.count
        span, part = self._span(shape), box[a : a + n]
        first = _ravel([start for start, _ in part], span)
        last = _ravel([stop - 1 for _, stop in part], span)
        out = box[:a] + ((first, last + 1),) + box[a + n :]

        def cut(piece):
            flat = _grid_flat(part, span) - first
            if (
                flat.size
                and flat.ravel()[-1] + 1 == piece.shape[a]
                and (flat.size == piece.shape[a])
            ):
                # The box is the whole run: a reshape, no copy.
                return np.reshape(
                    piece, piece.shape[:a] + flat.shape + piece.shape[a + 1 :]
                )
            return np.take(piece, flat, axis=a)

        return out, cut


@dataclasses.dataclass(frozen=True)
class Split(Op):
    """Splits dimension `axis` into `sizes` (the inverse of `Merge`); one
    size may be -1."""

    axis: int
    sizes: tuple

    def _sizes(self, shape):
        sizes = list(self.sizes)
        if -1 in sizes:
            known = math.prod(s for s in sizes if s != -1)
            sizes[sizes.index(-1)] = shape[self.axis] // known
        return tuple(sizes)

    def shape(self, shape):
        a = self.axis
        return shape[:a] + self._sizes(shape) + shape[a + 1 :]

    def forward(self, value):
        return np.reshape(value, self.shape(value.shape))

    def source(self, box, shape):
        a = self.axis
        sizes = self._sizes(shape)
        start, stop = box[a]
        # Each output index of the split dims is one input index; the
        # bounding box over the split dims holds the run [start, stop).
        out_box = []
        lo = np.unravel_index(start, sizes)
        hi = np.unravel_index(stop - 1, sizes)
        leading = True
        for k, size in enumerate(sizes):
            if leading and lo[k] == hi[k]:
                out_box.append((int(lo[k]), int(lo[k]) + 1))
                continue
            if leading:
                out_box.append((int(lo[k]), int(hi[k]) + 1))
                leading = False
            else:
                out_box.append((0, size))
        n = len(sizes)
        out = box[:a] + tuple(out_box) + box[a + 1 :]

        def cut(piece):
            moved = np.moveaxis(piece, range(a, a + n), range(n))
            flat = moved.reshape((-1,) + moved.shape[n:])
            grid = _grid_flat(out_box, sizes).ravel()
            keep = np.searchsorted(grid, np.arange(start, stop))
            return np.moveaxis(flat[keep], 0, a)

        return out, cut


@dataclasses.dataclass(frozen=True)
class Add(Op):
    """Adds a constant: their value is ours + `value` (e.g. a norm scale
    stored as an offset from one)."""

    value: float

    def shape(self, shape):
        return shape

    def forward(self, value):
        return value + np.asarray(self.value, value.dtype)

    def source(self, box, shape):
        return box, lambda p: p - np.asarray(self.value, p.dtype)


@dataclasses.dataclass(frozen=True)
class Permute(Op):
    """Reorders dimension `axis` by `order(size)` (their index k holds our
    index `order[k]`), e.g. a RoPE layout that interleaves pairs."""

    axis: int
    order: object

    def _order(self, size):
        order = np.asarray(
            self.order(size) if callable(self.order) else self.order
        )
        return order

    def shape(self, shape):
        return shape

    def forward(self, value):
        return np.take(value, self._order(value.shape[self.axis]), self.axis)

    def source(self, box, shape):
        a = self.axis
        order = self._order(shape[a])
        start, stop = box[a]
        position = np.argsort(order)[start:stop]
        first, last = int(position.min()), int(position.max())
        out = box[:a] + ((first, last + 1),) + box[a + 1 :]
        return out, lambda p: np.take(p, position - first, axis=a)


@dataclasses.dataclass(frozen=True)
class Pad(Op):
    """Adds `before` rows (and `after` rows) of zeros along `axis`: their
    table has rows ours does not (RoBERTa's and BART's position tables
    start at index 2). Import reads past them."""

    axis: int
    before: int
    after: int = 0

    def shape(self, shape):
        a = self.axis
        size = shape[a] + self.before + self.after
        return shape[:a] + (size,) + shape[a + 1 :]

    def forward(self, value):
        widths = [(0, 0)] * value.ndim
        widths[self.axis] = (self.before, self.after)
        return np.pad(value, widths)

    def source(self, box, shape):
        a = self.axis
        start, stop = box[a]
        out = box[:a] + ((start + self.before, stop + self.before),)
        return out + box[a + 1 :], lambda p: p


# === Shorthands for the usual layouts ===

KERNEL = (Transpose(),)
"""A `Dense` kernel: ours `(in, out)`, theirs `(out, in)`."""

HEADS_KERNEL = (Merge(1), Transpose())
"""A query/key/value kernel: ours `(hidden, heads, head_dim)`, theirs
`(heads * head_dim, hidden)`."""

HEADS_BIAS = (Merge(0),)
"""A query/key/value bias: ours `(heads, head_dim)`, theirs
`(heads * head_dim,)`."""

HEADS_OUTPUT_KERNEL = (Merge(0), Transpose())
"""An attention output kernel: ours `(heads, head_dim, hidden)`, theirs
`(hidden, heads * head_dim)`."""


# === Table entries ===

_FIELD = re.compile(r"\{(\w+)\}")


def _fields(template):
    return [f for _, f, _, _ in string.Formatter().parse(template) if f]


@dataclasses.dataclass(frozen=True)
class Weight:
    """One row of a family's tensor table.

    Args:
        ours: our variable path, with `{name}` fields matching digits
            (`transformer_layer_{i}/feedforward_gate_dense/kernel`).
        theirs: the Hugging Face tensor name, with the same fields
            (`model.layers.{i}.mlp.gate_proj.weight`). A field that `ours`
            does not have is a stacking index: our tensor stacks the
            tensors `theirs` names for 0, 1, ... along `stack_axis` (a
            mixture of experts stored one expert per tensor).
        ops: the conversion, ours -> theirs (see `Op`); `()` when equal.
        part: `(axis, start)` when the tensor is one part of a fused
            tensor (q/k/v in one matrix): the converted value lies at
            `start` along `axis` of `theirs`. Every part of a fused tensor
            names it, and the parts must tile it.
        stack_axis: the axis of ours that stacks the tensors (see
            `theirs`).
        ours_part: `(axis, start, stop)` when the row fills only that
            slice of our variable (a fused variable of separate Hugging
            Face tensors, e.g. a gate/up kernel concatenated on our side):
            `ops` and `stack_axis` then apply to the slice. The first row
            matching a variable decides: if it has an `ours_part`, every
            row with one that matches the variable joins it, and together
            they must tile the variable along one axis.
        plus: the name (same fields) of a Hugging Face tensor whose first
            row their model adds to every row of this one, folded in: a
            token-type table whose only used type is 0 (RoBERTa). Import
            adds that row (along the last axis of ours); export writes the
            tensor as zeros of shape `(1, last dimension of ours)`. Only on
            a row without stacking index, `part` or `ours_part`.
        view: with `part`, the shape of the fused tensor in which the parts
            lie, when that is not its stored shape: `view_ops` (export
            direction) turn the assembled view into the stored tensor.
            Bloom's `query_key_value` `(3 * hidden, hidden)` holds each
            head's query, key and value rows in turn: its view
            `(heads, 3 * head_dim, hidden)` holds the queries at `0` along
            axis 1, and `Merge(0)` stores it.
        view_ops: the ops from `view` to the stored tensor (every part of
            the tensor names the same `view` and `view_ops`).
        stored_as: other forms in which a checkpoint may store `theirs`
            (e.g. `(MXFP4,)`): when it lacks `theirs`, the first form
            whose tensors it has is read instead, each device reading only
            the box of them its shard needs and converting it (import
            only; export writes `theirs`).
    """

    ours: str
    theirs: str
    ops: tuple = ()
    part: tuple = None
    stack_axis: int = 0
    ours_part: tuple = None
    plus: str = None
    view: tuple = None
    view_ops: tuple = ()
    stored_as: tuple = ()

    def __post_init__(self):
        ours, theirs = set(_fields(self.ours)), _fields(self.theirs)
        if self.plus is not None and (
            self.part is not None
            or self.ours_part is not None
            or set(_fields(self.plus)) != ours
            or len(set(theirs)) != len(ours)
        ):
            raise ValueError(
                f"Weight {self.ours!r} -> {self.theirs!r}: `plus` "
                f"({self.plus!r}) needs a row without stacking index, `part` "
                "or `ours_part`, and the fields of the variable path."
            )
        stacks = [f for f in theirs if f not in ours]
        if len(stacks) > 1:
            raise ValueError(
                f"Weight {self.ours!r} -> {self.theirs!r}: at most one field "
                f"of the Hugging Face name may be a stacking index; "
                f"{stacks} are not in the variable path."
            )
        missing = ours - set(theirs)
        if missing:
            raise ValueError(
                f"Weight {self.ours!r} -> {self.theirs!r}: field(s) "
                f"{sorted(missing)} of the variable path are not in the "
                "Hugging Face name."
            )

    @property
    def stack_field(self):
        ours = set(_fields(self.ours))
        stacks = [f for f in _fields(self.theirs) if f not in ours]
        return stacks[0] if stacks else None

    def pattern(self):
        """A regex matching our variable paths, with one group per field."""
        out, position = [], 0
        for match in _FIELD.finditer(self.ours):
            out.append(re.escape(self.ours[position : match.start()]))
            out.append(rf"(?P<{match.group(1)}>\d+)")
            position = match.end()
        out.append(re.escape(self.ours[position:]))
        return re.compile("".join(out))


@dataclasses.dataclass(frozen=True)
class Binding:
    """A `Weight` applied to one variable: the Hugging Face tensor(s) it is.

    Attributes:
        path: our variable path.
        shape: our variable's shape (its slice's, with `within`).
        names: the Hugging Face tensor names: one, or one per stacked index.
        weight: the table row.
        within: `(axis, start, stop)` of our variable this binding fills
            (the row's `ours_part`), or None for all of it.
    """

    path: str
    shape: tuple
    names: tuple
    weight: Weight
    within: tuple = None

    def select(self, value):
        """This binding's slice of our variable's whole `value`."""
        if self.within is None:
            return value
        axis, start, stop = self.within
        where = [slice(None)] * np.ndim(value)
        where[axis] = slice(start, stop)
        return value[tuple(where)]

    @property
    def stacked(self):
        return self.weight.stack_field is not None

    @property
    def plus(self):
        """The name of the tensor folded in (`Weight.plus`), or None."""
        if self.weight.plus is None:
            return None
        fields = self.weight.pattern().fullmatch(self.path).groupdict()
        return self.weight.plus.format(**fields)

    def _piece_shape(self):
        if not self.stacked:
            return self.shape
        axis = self.weight.stack_axis
        return self.shape[:axis] + self.shape[axis + 1 :]

    def converted_shape(self):
        """The shape of one converted piece (before placing it in a part)."""
        shape = self._piece_shape()
        for op in self.weight.ops:
            shape = tuple(op.shape(shape))
        return shape

    def stored_shape(self):
        """The stored shape of the fused tensor a `view` row fills (None
        without a view)."""
        if self.weight.view is None:
            return None
        shape = tuple(self.weight.view)
        for op in self.weight.view_ops:
            shape = tuple(op.shape(shape))
        return shape

    def fuse(self, view):
        """The assembled `view` of a fused tensor, as stored (export)."""
        for op in self.weight.view_ops:
            view = op.forward(view)
        return np.ascontiguousarray(view)

    def region(self):
        """`(axis, start, stop)` of the fused tensor it fills, or None."""
        if self.weight.part is None:
            return None
        axis, start = self.weight.part
        return axis, start, start + self.converted_shape()[axis]

    def plan(self, box):
        """How to read our `box`: `(stack indices, their box, cut)`.

        `stack indices` are the stacked tensors to read (`[None]` when not
        stacked), `their box` the box of each to read, and `cut(piece)`
        turns each piece read into ours (without the stacking axis).
        """
        indices = [None]
        if self.stacked:
            axis = self.weight.stack_axis
            start, stop = box[axis]
            indices = list(range(start, stop))
            box = box[:axis] + box[axis + 1 :]
        shape = self._piece_shape()
        cuts = []
        for op in self.weight.ops:
            out_box, cut = op.source(tuple(box), tuple(shape))
            cuts.append(cut)
            shape, box = tuple(op.shape(shape)), out_box
        if self.weight.part is not None:
            axis, offset = self.weight.part
            box = list(box)
            start, stop = box[axis]
            box[axis] = (start + offset, stop + offset)
            box = tuple(box)
        if self.weight.view is not None:
            # The box of the view, then of the stored tensor.
            shape = tuple(self.weight.view)
            for op in self.weight.view_ops:
                out_box, view_cut = op.source(tuple(box), shape)
                cuts.append(view_cut)
                shape, box = tuple(op.shape(shape)), out_box

        def cut(piece):
            for step in reversed(cuts):
                piece = step(piece)
            return piece

        return indices, box, cut

    def convert(self, piece):
        """One piece of ours (a stacked slice, or the whole value when not
        stacked) converted to theirs."""
        for op in self.weight.ops:
            piece = op.forward(piece)
        return np.ascontiguousarray(piece)

    def to_theirs(self, value):
        """Our whole value -> `[(name, converted value)]` (export)."""
        value = self.select(value)
        if not self.stacked:
            return [(self.names[0], self.convert(value))]
        axis = self.weight.stack_axis
        return [
            (name, self.convert(np.take(value, j, axis=axis)))
            for j, name in enumerate(self.names)
        ]


def _bound(weight, match, path, shape, within=None):
    fields = match.groupdict()
    stack = weight.stack_field
    if stack is None:
        names = (weight.theirs.format(**fields),)
    else:
        names = tuple(
            weight.theirs.format(**fields, **{stack: j})
            for j in range(shape[weight.stack_axis])
        )
    return Binding(path, shape, names, weight, within)


def _bound_parts(matches, path, shape):
    """The bindings of the rows filling slices of one variable."""
    parts = sorted(
        [
            (weight.ours_part, weight, match)
            for weight, match in matches
            if weight.ours_part is not None
        ],
        key=lambda part: part[0],
    )
    axis = parts[0][0][0]
    position = 0
    bindings = []
    for (part_axis, start, stop), weight, match in parts:
        if part_axis != axis or start != position or stop <= start:
            raise ValueError(
                f"The rows filling {path} {shape} (ours_part "
                f"{[part for part, _, _ in parts]}) do not tile it along "
                "one axis."
            )
        position = stop
        sub = shape[:axis] + (stop - start,) + shape[axis + 1 :]
        bindings.append(_bound(weight, match, path, sub, (axis, start, stop)))
    if position != shape[axis]:
        raise ValueError(
            f"The rows filling {path} {shape} (ours_part "
            f"{[part for part, _, _ in parts]}) cover {position} of its "
            f"{shape[axis]} entries along axis {axis}."
        )
    return bindings


def bind(weights, variables):
    """Matches a table against variables.

    Args:
        weights: the family's `Weight`s.
        variables: `(path, shape)` pairs.

    Returns:
        `(bindings, unmatched paths)`: one `Binding` per variable a row
        matches (the first row that matches wins), or one per slice for
        rows with an `ours_part` (in order along the slices), and the paths
        no row matches.
    """
    patterns = [(w, w.pattern()) for w in weights]
    bindings, unmatched = [], []
    for path, shape in variables:
        shape = tuple(int(d) for d in shape)
        matches = []
        for weight, pattern in patterns:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            if not matches and weight.ours_part is None:
                bindings.append(_bound(weight, match, path, shape))
                break
            matches.append((weight, match))
        else:
            if matches:
                bindings.extend(_bound_parts(matches, path, shape))
            else:
                unmatched.append(path)
    return bindings, unmatched


def linear_rows(ours, theirs, kernel_ops=KERNEL, bias_ops=()):
    """The rows of a kernel and its bias.

    `<ours>/kernel` is `<theirs>.weight` (through `kernel_ops`, a
    transposed `Dense` kernel by default) and `<ours>/bias` is
    `<theirs>.bias`.
    """
    return [
        Weight(f"{ours}/kernel", f"{theirs}.weight", kernel_ops),
        Weight(f"{ours}/bias", f"{theirs}.bias", bias_ops),
    ]


def layer_norm_rows(ours, theirs):
    """A `LayerNormalization`'s rows: `gamma`/`beta` are `weight`/`bias`."""
    return [
        Weight(f"{ours}/gamma", f"{theirs}.weight"),
        Weight(f"{ours}/beta", f"{theirs}.bias"),
    ]


# === Tensors stored in another form (quantized) ===

# E2M1 (4-bit float) values of the codes 0..15: the sign is bit 3, the
# exponent bits 1-2 (bias 1) and the mantissa bit 0; exponent 0 is
# subnormal (0 or 0.5).
_E2M1_VALUES = np.array(
    [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6],
    np.float32,
)
# Each byte's two values (low nibble first) as one 8-byte item: one
# gather per byte instead of two per value.
_E2M1_PAIRS = (
    np.stack(
        [_E2M1_VALUES[np.arange(256) & 15], _E2M1_VALUES[np.arange(256) >> 4]],
        axis=-1,
    )
    .view(np.uint64)
    .reshape(256)
)
# E8M0 scales: 2 ** (code - 127), exact in float32 (2 ** -127 is
# subnormal); 255 is NaN.
with np.errstate(over="ignore"):
    _E8M0_VALUES = np.ldexp(np.float32(1), np.arange(256) - 127).astype(
        np.float32
    )
_E8M0_VALUES[255] = np.nan
# Values dequantized at a time (bounds the float32 temporary).
_MXFP4_CHUNK = 1 << 22


def dequantize_mxfp4(blocks, scales, dtype="float32"):
    """MXFP4 values from their codes and scales.

    Args:
        blocks: uint8 array `(..., groups, 16)`: 32 E2M1 codes per group,
            two a byte, the first in the low nibble.
        scales: uint8 array `(..., groups)`: each group's E8M0 scale, the
            power of two `2 ** (scale - 127)` (255 is NaN).
        dtype: the result's dtype. float32 and bfloat16 hold every MXFP4
            value exactly.

    Returns:
        Array `(..., groups * 32)`.
    """
    blocks, scales = np.asarray(blocks), np.asarray(scales)
    *lead, groups, size = blocks.shape
    out = np.empty((*lead, groups, 2 * size), dtype)
    rows = blocks.reshape(-1, size)
    exponents = scales.reshape(-1)
    flat = out.reshape(-1, 2 * size)
    step = max(1, _MXFP4_CHUNK // (2 * size))
    for start in range(0, rows.shape[0], step):
        stop = start + step
        values = _E2M1_PAIRS[rows[start:stop]].view(np.float32)
        # A power of two times an E2M1 value: exact (or inf past float32).
        with np.errstate(over="ignore", invalid="ignore"):
            values *= _E8M0_VALUES[exponents[start:stop]][:, None]
        flat[start:stop] = values
    return out.reshape(*lead, groups * 2 * size)


class StoredTensor:
    """A checkpoint tensor held as other tensors (its `parts`), e.g. MXFP4
    blocks and scales; it reads like a tensor of `shape`.

    Attributes:
        name: the name of the tensor it stands for (not in the file).
        shape: its shape.
        dtype: the narrowest dtype holding its values exactly (for the
            loader's dtype checks; `read` returns the dtype asked for).
        parts: the `TensorInfo`s of the tensors it is read from.
        filenames: their files.
    """

    def __init__(self, name, shape, dtype, parts, form):
        self.name = name
        self.shape = tuple(shape)
        self.dtype = dtype
        self.parts = tuple(parts)
        self.form = form

    @property
    def filenames(self):
        return tuple(dict.fromkeys(part.filename for part in self.parts))

    def describe(self):
        names = " + ".join(part.describe() for part in self.parts)
        return f"{names} ({self.form.name} {self.name}, dequantized)"

    def read(self, read, box, dtype="float32"):
        """The values in `box` (one `(start, stop)` per dimension), in
        `dtype`, read through `read(name, box)` from the parts' boxes
        holding them."""
        return self.form.read(self, read, box, dtype)


@dataclasses.dataclass(frozen=True)
class Mxfp4:
    """MXFP4 (OCP microscaling 4-bit float), as OpenAI's GPT-OSS
    checkpoints store their experts.

    A tensor `T` of shape `(..., rows, columns)` named `name` is stored
    transposed, `(..., columns, rows)`, and quantized along that last axis
    in groups of 32 values: `name + "_blocks"`, uint8 `(..., columns,
    rows / 32, 16)`, holds each group's 32 E2M1 codes, two a byte (low
    nibble first), and `name + "_scales"`, uint8 `(..., columns, rows /
    32)`, each group's E8M0 scale `2 ** (scale - 127)`. (So `T` is
    Hugging Face's unquantized `gate_up_proj` `(experts, hidden, 2 *
    intermediate)`.) A box of `T` reads the groups that hold its rows,
    for its columns only.
    """

    blocks_suffix: str = "_blocks"
    scales_suffix: str = "_scales"
    name: str = "MXFP4"
    group: int = 32

    def find(self, name, tensors):
        """`(StoredTensor or None, problems)` for `name` in `tensors`
        (name -> `TensorInfo`): None when its blocks are absent; problems
        name malformed or missing parts."""
        blocks = tensors.get(name + self.blocks_suffix)
        if blocks is None:
            return None, []
        scales = tensors.get(name + self.scales_suffix)
        if scales is None:
            return None, [
                f"{name + self.scales_suffix}: missing (the {self.name} "
                f"scales of {blocks.describe()}, expected shape "
                f"{blocks.shape[:-1]})"
            ]
        half = self.group // 2
        problems = []
        if (
            blocks.dtype != "uint8"
            or len(blocks.shape) < 3
            or blocks.shape[-1] != half
        ):
            problems.append(
                f"{blocks.describe()} has shape {blocks.shape} and dtype "
                f"{blocks.dtype}; {self.name} blocks are uint8 of shape "
                f"(..., columns, groups, {half})"
            )
        elif scales.dtype != "uint8" or scales.shape != blocks.shape[:-1]:
            problems.append(
                f"{scales.describe()} has shape {scales.shape} and dtype "
                f"{scales.dtype}; the {self.name} scales of "
                f"{blocks.describe()} {blocks.shape} are uint8 of shape "
                f"{blocks.shape[:-1]}"
            )
        if problems:
            return None, problems
        *lead, columns, groups, _ = blocks.shape
        shape = (*lead, groups * self.group, columns)
        return StoredTensor(name, shape, "bfloat16", (blocks, scales), self), []

    def read(self, tensor, read, box, dtype):
        blocks, scales = tensor.parts
        *lead, (start, stop), columns = box
        first = start // self.group
        last = -(-stop // self.group)
        groups = (first, last)
        codes = read(
            blocks.name, (*lead, columns, groups, (0, self.group // 2))
        )
        exponents = read(scales.name, (*lead, columns, groups))
        values = dequantize_mxfp4(codes, exponents, dtype)
        offset = first * self.group
        values = values[..., start - offset : stop - offset]
        return np.swapaxes(values, -1, -2)


MXFP4 = Mxfp4()
"""Hugging Face's MXFP4 experts (`*_blocks`, `*_scales`); see `Mxfp4`."""
