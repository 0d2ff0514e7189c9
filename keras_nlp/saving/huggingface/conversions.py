"""The conversions between our variables and Hugging Face tensors.

A family's tensor table (`tensor_table.Weight` rows) says how each of our
tensors becomes a Hugging Face tensor: a short chain of `ops`, written in
the export direction (our tensor -> theirs), that the importer runs
backwards.

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
