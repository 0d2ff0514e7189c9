"""A family's tensor table: which Hugging Face tensor each variable is.

A table is a list of `Weight` rows. Each says which of our variables (a
path, or a template such as
`transformer_layer_{i}/self_attention/query/kernel`) is which Hugging Face
tensor (`model.layers.{i}.self_attn.q_proj.weight`) and how one becomes the
other: a short chain of `ops` (`conversions`), written in the export
direction (our tensor -> theirs), that the importer runs backwards. `bind`
applies a table to a model's variables. A checkpoint may store a tensor in
another form (`Weight.stored_as`, e.g. `mxfp4.MXFP4`), read as a
`StoredTensor`; so is any tensor stored as block-scaled float8
(`fp8.Fp8`), whatever its row.
"""

import dataclasses
import re
import string

import numpy as np

from keras_nlp.saving.huggingface.conversions import HEADS_BIAS
from keras_nlp.saving.huggingface.conversions import HEADS_KERNEL
from keras_nlp.saving.huggingface.conversions import HEADS_OUTPUT_KERNEL
from keras_nlp.saving.huggingface.conversions import KERNEL

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
        optional: whether a checkpoint may lack `theirs` (a pooler that
            Hugging Face's masked-LM classes leave out): the variable then
            keeps the value its initializer gives, as the class builds it,
            and the load names every such variable in one warning. Export
            writes it as any other.
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
    optional: bool = False

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


def attention_rows(
    ours,
    theirs,
    output="o_proj",
    kernel_ops=HEADS_KERNEL,
    use_bias=False,
    names=None,
):
    """The rows of an attention's projections.

    `<ours>/{query,key,value}/kernel` are `<theirs>.{q,k,v}_proj.weight`
    (through `kernel_ops`) and `<ours>/attention_output/kernel` is
    `<theirs>.<output>.weight` (`HEADS_OUTPUT_KERNEL`). With `use_bias`,
    each kernel's row is followed by its bias's (`HEADS_BIAS` for the
    query, key and value). `names` renames our projections (`{"query":
    "q_proj", ..., "output": "o_proj"}`, an attention's `sublayer_names`).
    """
    names = {"output": "attention_output", **(names or {})}
    projections = [
        (
            f"{ours}/{names.get(name, name)}",
            f"{theirs}.{proj}_proj",
            kernel_ops,
            HEADS_BIAS,
        )
        for name, proj in (("query", "q"), ("key", "k"), ("value", "v"))
    ]
    projections.append(
        (
            f"{ours}/{names['output']}",
            f"{theirs}.{output}",
            HEADS_OUTPUT_KERNEL,
            (),
        )
    )
    rows = []
    for our_name, their_name, ops, bias_ops in projections:
        if use_bias:
            rows += linear_rows(our_name, their_name, ops, bias_ops)
        else:
            rows.append(
                Weight(f"{our_name}/kernel", f"{their_name}.weight", ops)
            )
    return rows


def layer_norm_rows(ours, theirs):
    """A `LayerNormalization`'s rows: `gamma`/`beta` are `weight`/`bias`."""
    return [
        Weight(f"{ours}/gamma", f"{theirs}.weight"),
        Weight(f"{ours}/beta", f"{theirs}.bias"),
    ]


# === Tensors stored in another form (`Weight.stored_as`) ===


class StoredTensor:
    """A checkpoint tensor held as other tensors (its `parts`), e.g. MXFP4
    blocks and scales; it reads like a tensor of `shape`.

    Attributes:
        name: the name of the tensor it stands for (not in the file).
        shape: its shape.
        dtype: the narrowest dtype holding its values exactly (for the
            loader's dtype checks; `read` returns the dtype asked for).
        parts: the `TensorInfo`s of the tensors it is read from.
        form: the form it is stored in (e.g. `mxfp4.MXFP4`): its
            `find(name, tensors)` makes the `StoredTensor`, its
            `read(tensor, read, box, dtype)` reads a box of it, and its
            `name` names it in messages.
        filenames: the files of its parts.
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
