"""A plan as a picture: each weight kind's split over the mesh, as SVG.

One row per weight kind (repeated blocks folded, as in the text plan): its
name, a grid with one square per device laid out like the mesh (the first
axis down, the others across), and its spec, shard shape, bytes per device
(summed over the row's blocks, as the text's size column) and decision,
its reason wrapped whole. Squares of one color hold the same piece of the
weight; a weight whole on every device is gray. A standalone SVG file, no
scripts, opened by any browser.
"""

import itertools
import math
from xml.sax.saxutils import escape

from keras_nlp.distribution.formatting import format_bytes
from keras_nlp.distribution.plan_text import SIZE_MEANING
from keras_nlp.distribution.plan_text import wrap_words
from keras_nlp.distribution.rules import format_spec

CELL = 14  # pixels per device square
GAP = 2
# A mesh row longer than this wraps, so 1x256 stays readable.
MAX_COLUMNS = 32
# Beyond this many devices the grids are left out: the text remains.
MAX_DRAWN_DEVICES = 1024
# A 12-pixel monospace character's advance, rounded up.
CHARACTER_WIDTH = 7.5
# The text beside each grid wraps at this many characters.
TEXT_CHARACTERS = 80
ROW_PADDING = 10
LINE = 15
WHOLE_COLOR = "#9e9e9e"
DECISION_COLORS = {
    "sharded": "#1b5e20",
    "alternative": "#006064",
    "fallback": "#e65100",
    "replicated": "#616161",
    "user": "#6a1b9a",
}


def shard_color(index, count):
    """The fill of shard `index` of `count`; one shard (whole) is gray."""
    if count == 1:
        return WHOLE_COLOR
    hue = round(360 * index / count)
    return f"hsl({hue}, 65%, 55%)"


def device_shards(spec, mesh):
    """Which shard each device holds, in mesh order (row-major).

    Args:
        spec: one mesh-axis entry per dimension (`None`, a name, a tuple).
        mesh: the plan's `MeshShape`.

    Returns:
        `(shard_ids, count)`: a list with one shard number in
        `[0, count)` per device, and the number of distinct shards.
    """
    sizes = mesh.axis_sizes
    used = [
        axis
        for entry in spec
        for axis in (entry if isinstance(entry, tuple) else (entry,))
        if axis is not None
    ]
    count = math.prod(sizes[axis] for axis in used)
    shard_ids = []
    for coords in itertools.product(*(range(s) for s in mesh.shape)):
        position = dict(zip(mesh.axis_names, coords, strict=True))
        shard = 0
        for axis in used:
            shard = shard * sizes[axis] + position[axis]
        shard_ids.append(shard)
    return shard_ids, count


def _grid_shape(mesh):
    """`(rows, columns)` of the drawn grid, wrapping long rows."""
    rows = mesh.shape[0] if len(mesh.shape) > 1 else 1
    columns = mesh.num_devices // rows
    if columns > MAX_COLUMNS:
        rows *= math.ceil(columns / MAX_COLUMNS)
        columns = MAX_COLUMNS
    return rows, columns


def render_plan_svg(plan, rows, title):
    """The SVG text of `plan`'s `rows` (see `LayoutPlan.to_svg`).

    Args:
        plan: a `LayoutPlan`.
        rows: `(label, count, WeightPlan)` per drawn row.
        title: the heading.
    """
    mesh = plan.mesh
    draw = mesh.num_devices <= MAX_DRAWN_DEVICES
    grid_rows, grid_columns = _grid_shape(mesh) if draw else (0, 0)
    grid_width = grid_columns * (CELL + GAP)
    grid_height = grid_rows * (CELL + GAP)
    names = [
        label if count == 1 else f"{label}  x{count}"
        for label, count, _ in rows
    ]
    texts = [_row_text(count, weight) for _, count, weight in rows]
    row_heights = [
        max(grid_height, len(lines) * LINE, 2 * LINE) + ROW_PADDING
        for lines in texts
    ]
    label_width = round(max(map(len, names), default=0) * CHARACTER_WIDTH + 20)
    text_x = label_width + grid_width + 20
    longest = max(
        (len(line) for lines in texts for _, line in lines), default=0
    )
    notes = [
        _totals(plan),
        *_sequence_notes(plan),
        "One square per device, the mesh's first axis down "
        f"({' x '.join(mesh.axis_names)}).",
        "Squares of one color hold the same piece of the weight; gray: the "
        "whole weight on every device.",
        f"Bytes are {SIZE_MEANING}: one device's bytes of the weight, summed "
        "over the N blocks of a row marked xN.",
    ]
    text_width = max(longest, TEXT_CHARACTERS) * CHARACTER_WIDTH
    width = round(
        max(text_x + text_width, max(map(len, notes)) * CHARACTER_WIDTH + 20)
    )
    header = (len(notes) + 1) * LINE + 20
    height = header + sum(row_heights) + 10
    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" '
        'font-family="monospace" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="{LINE + 4}" font-size="15" font-weight="bold" '
        f'class="title">{escape(title)}</text>',
    ]
    for number, note in enumerate(notes, start=2):
        kind = ' class="totals"' if number == 2 else ' fill="#555"'
        parts.append(
            f'<text x="10" y="{number * LINE + 8}"{kind}>{escape(note)}</text>'
        )
    top = header
    for name, (_, _, weight), lines, row_height in zip(
        names, rows, texts, row_heights, strict=True
    ):
        parts.append(
            f'<g class="weight" data-decision="{weight.decision}">'
            f'<text x="10" y="{top + LINE}" font-weight="bold">'
            f"{escape(name)}</text>"
            f'<text x="10" y="{top + 2 * LINE}" fill="#555">'
            f"{escape(str(weight.shape))} {escape(weight.dtype)}</text>"
        )
        if draw:
            parts.append(_grid(weight, mesh, label_width, top, grid_columns))
        for number, (attributes, line) in enumerate(lines, start=1):
            parts.append(
                f'<text x="{text_x}" y="{top + number * LINE}"{attributes}>'
                f"{escape(line)}</text>"
            )
        parts.append("</g>")
        top += row_height
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _row_text(count, weight):
    """`(attributes, line)` per line beside a row's grid.

    Its spec and shard, its bytes per device, its decision in its color
    and the reason, wrapped whole.
    """
    shard = f"{format_spec(weight.spec)} -> shard {weight.shard_shape}"
    per_device = format_bytes(weight.shard_bytes * count)
    if count > 1:
        shard += " in each block"
        per_device += f" {SIZE_MEANING}"
    else:
        per_device += " per device"
    color = DECISION_COLORS.get(weight.decision, "black")
    lines = [("", line) for line in _wrapped(shard) + _wrapped(per_device)]
    lines.append((f' fill="{color}" class="decision"', weight.decision))
    if weight.decision != "sharded":
        lines += [(' fill="#555"', line) for line in _wrapped(weight.reason)]
    return lines


def _wrapped(text):
    return wrap_words(text, TEXT_CHARACTERS, indent="  ").split("\n")


def _grid(weight, mesh, left, top, columns):
    shard_ids, count = device_shards(weight.spec, mesh)
    squares = []
    for device, shard in enumerate(shard_ids):
        row, column = divmod(device, columns)
        squares.append(
            f'<rect x="{left + column * (CELL + GAP)}" '
            f'y="{top + row * (CELL + GAP)}" width="{CELL}" '
            f'height="{CELL}" fill="{shard_color(shard, count)}">'
            f"<title>device {device}: shard {shard + 1} of {count}</title>"
            "</rect>"
        )
    return '<g class="mesh">' + "".join(squares) + "</g>"


def _totals(plan):
    return (
        f"{plan.num_devices} devices; per device "
        f"{format_bytes(plan.bytes_per_device)}, ideal "
        f"{format_bytes(plan.ideal_bytes_per_device)} (ratio "
        f"{plan.memory_ratio:.3f}); {len(plan.fallbacks)} fallback(s)"
    )


def _sequence_notes(plan):
    """How the plan splits sequences: activations and caches, if at all."""
    axes = [a for a in (plan.context_axis,) if a]
    if plan.sequence_parallel[0]:
        axes.append(plan.model_axis)
    if not axes:
        return []
    notes = [
        "Sequence: the residual stream split over "
        + ", ".join(f"'{a}'" for a in axes)
        + (
            " (sequence parallel on the model axis)"
            if plan.sequence_parallel[0]
            else ""
        )
        + (
            f"; keys and values gathered over '{plan.context_axis}'"
            if plan.context_axis
            else ""
        )
        + "."
    ]
    lengths = sorted({c.length_axes for c in plan.kv_caches if c.length_axes})
    if lengths:
        notes.append(
            "KV caches: length split over "
            + " or ".join(", ".join(f"'{a}'" for a in axes) for axes in lengths)
            + "."
        )
    return notes
