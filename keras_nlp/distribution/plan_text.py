"""A plan as text for a terminal: a `rich` table where it fits, else entries.

Repeated blocks fold into one row per weight kind: the weight's name
inside its block (`attention/key/kernel`) and the blocks it repeats in
(`decoder_block 0-17`); `plan_svg` draws the same rows as a picture. A
name is never cut: the table is chosen only where every name fits whole
in its column, and the entries break a name only at a `/`, and only when
it is wider than the console. Continuation lines are indented, and a
number stays on the line of its unit. Plans come in as objects: this
module reads their attributes and imports nothing of theirs.
"""

import dataclasses
import os
import re
import textwrap

from keras_nlp.distribution.formatting import format_bytes
from keras_nlp.distribution.rules import format_spec

# Without a terminal or `COLUMNS` (a pipe, a file), plans print this wide.
PIPED_WIDTH = 100
# The table needs this many columns for its decisions' reasons (a reason
# is often 200 characters); with fewer, the plan prints as entries.
MIN_DECISION_WIDTH = 40
# What the size column holds, in the words the text and the picture use.
SIZE_MEANING = "per device, all blocks shown"
# A row's color by its weight's decision; "sharded" is plain.
DECISION_STYLES = {
    "fallback": "yellow",
    "alternative": "cyan",
    "replicated": "dim",
    "user": "magenta",
}
# Spaces that a wrap must not break: after a number (`41 MB/device`,
# `110 layer outputs`) and between `size`/`dim` and their number.
_GLUED_SPACE = re.compile(r"(?<=\d) (?=\S)|(?:(?<=\bsize)|(?<=\bdim)) (?=\d)")
_NO_BREAK = "\u00a0"
# A label such as `total parameters:      ` that a summary line's
# continuation lines align under.
_SUMMARY_LABEL = re.compile(r"[a-z][a-z ,]*:\s+")


def folded_rows(weights):
    """`(template, count, WeightPlan, block indices)` per weight kind.

    Weights that differ only in the block index of their leading layer
    name (and share shape, spec and reason) fold into one row.
    """
    groups = {}
    for weight in weights:
        template, index = _block_template(weight.path)
        key = (template, weight.shape, weight.spec, weight.reason)
        if key not in groups:
            groups[key] = [template, 0, weight, []]
        groups[key][1] += 1
        if index is not None:
            groups[key][3].append(index)
    return [tuple(row) for row in groups.values()]


def _block_template(path):
    """`decoder_block_3/attention/...` -> `("decoder_block_{i}/...", 3)`."""
    # Only the leading layer name carries the block index.
    match = re.match(r"^([^/]*?)_(\d+)(?=/)", path)
    if not match:
        return path, None
    template = f"{match.group(1)}_{{i}}" + path[match.end() :]
    return template, int(match.group(2))


def plan_title(plan):
    return f"{plan.preset or plan.backbone} on mesh {plan.mesh}"


def plan_console(file=None):
    """A `rich` console as wide as the terminal, `COLUMNS` or `PIPED_WIDTH`.

    `COLUMNS` wins wherever it is set (rich reads it), a terminal or a
    notebook keeps its own width, and a pipe or file without `COLUMNS`
    gets `PIPED_WIDTH` columns rather than rich's 80.

    Args:
        file: the stream to print to (default: standard output).

    Returns:
        A `rich.console.Console`.
    """
    from rich.console import Console

    console = Console(file=file)
    if (
        console.is_terminal
        or console.is_jupyter
        or os.environ.get("COLUMNS", "").isdigit()
    ):
        return console
    return Console(file=file, width=PIPED_WIDTH)


def print_plan(plan, console=None, all_weights=False):
    """Prints `plan`'s weights and then its summary (see `LayoutPlan.print`).

    Args:
        plan: a `LayoutPlan`.
        console: a `rich.console.Console` (default: `plan_console()`).
        all_weights: bool, one row per weight instead of per weight kind.
    """
    from rich.text import Text

    console = console or plan_console()
    if all_weights:
        folded = [
            (template, 1, weight, [] if index is None else [index])
            for weight in plan.weights
            for template, index in [_block_template(weight.path)]
        ]
    else:
        folded = folded_rows(plan.weights)
    rows = [_Row.of(*row) for row in folded]
    title = plan_title(plan)
    width = console.width
    table = _table_layout(rows, width)
    if table is not None:
        _print_table(console, title, rows, *table)
    else:
        _print_entries(console, title, rows, width)
    for line in plan.summary().splitlines():
        label = _SUMMARY_LABEL.match(line)
        indent = len(label.group()) if label else 4
        if indent > width // 2:
            indent = 4
        console.print(Text(wrap_words(line, width, indent=" " * indent)))


@dataclasses.dataclass(frozen=True)
class _Row:
    """One printed row: a weight kind, or one weight with `all_weights`."""

    name: str  # the path inside its block, or the whole path
    blocks: str  # e.g. "decoder_block 0-17"; "" outside repeated blocks
    count: int
    weight: object

    @classmethod
    def of(cls, template, count, weight, indices):
        name, blocks = template, ""
        if indices and "_{i}/" in template:
            layer, name = template.split("_{i}/", 1)
            blocks = f"{layer} {index_ranges(indices)}"
        return cls(name, blocks, count, weight)

    @property
    def size(self):
        return format_bytes(self.weight.shard_bytes * self.count)

    @property
    def style(self):
        return DECISION_STYLES.get(self.weight.decision)

    @property
    def decision(self):
        return decision_text(self.weight)


def wrap_words(text, width, indent="", first_indent=""):
    """`text` wrapped to `width`, a number kept with its unit.

    Breaks only at spaces (never inside a hyphenated or slashed word); a
    single word longer than a line is split only as a last resort.

    Args:
        text: str.
        width: int, the longest line, indents included.
        indent: str, the start of every line but the first.
        first_indent: str, the start of the first line.

    Returns:
        str, lines joined by newlines.
    """
    lines = textwrap.wrap(
        _GLUED_SPACE.sub(_NO_BREAK, text),
        width=max(width, len(indent) + 8),
        initial_indent=first_indent,
        subsequent_indent=indent,
        break_on_hyphens=False,
    )
    return "\n".join(lines).replace(_NO_BREAK, " ")


def _wrap_path(path, width, indent):
    """`path` in lines of `width`, broken after a `/` only if it must be."""
    lines, line = [], ""
    for part in re.findall(r"[^/]*/|[^/]+$", path):
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = indent
        line += part
    return lines + [line]


def _print_entries(console, title, rows, width):
    """Two or more lines per row: name, blocks and size; spec, shard and
    shape, and decision.

    Sizes end in one column, right after the longest name and blocks that
    fit beside theirs; a row whose name and blocks do not fit on one line
    puts the blocks and size on the next.
    """
    from rich.text import Text

    heads = [f"{row.name}  {row.blocks}".strip() for row in rows]
    size_width = max(len(row.size) for row in rows)
    fitting = [
        len(head) for head in heads if len(head) + 2 + size_width <= width
    ]
    size_end = min(
        width,
        max(
            max(fitting, default=0) + 2 + size_width,
            len(_ENTRIES_HEADER) + 2 + len(SIZE_MEANING),
        ),
    )
    console.print(Text(title, style="bold"))
    console.print(Text(_spread(_ENTRIES_HEADER, SIZE_MEANING, size_end)))
    for row, head in zip(rows, heads, strict=True):
        if len(head) + 2 + len(row.size) <= width:
            lines = [head]
        else:
            # The name on a line of its own, the blocks under it.
            lines = _wrap_path(row.name, width, "    ")
            if row.blocks:
                blocks = wrap_words(
                    row.blocks, width, indent="    ", first_indent="  "
                )
                lines += blocks.split("\n")
        if len(lines[-1]) + 2 + len(row.size) <= size_end:
            lines[-1] = _spread(lines[-1], row.size, size_end)
        elif len(lines[-1]) + 2 + len(row.size) <= width:
            lines[-1] = _spread(lines[-1], row.size, width)
        else:
            lines.append(row.size.rjust(size_end))
        console.print(Text("\n".join(lines), style="bold"))
        weight = row.weight
        # A spec or shape is one value: it wraps whole.
        spec, shard, shape = (
            str(value).replace(" ", _NO_BREAK)
            for value in (
                format_spec(weight.spec),
                weight.shard_shape,
                weight.shape,
            )
        )
        body = wrap_words(
            f"{spec}  shard {shard} of {shape}  {row.decision}",
            width,
            indent="    ",
            first_indent="  ",
        )
        console.print(Text(body, style=row.style))


_ENTRIES_HEADER = "weight  blocks"


def _spread(left, right, width):
    """`left`, then `right` ending at column `width`."""
    return left + " " * max(2, width - len(left) - len(right)) + right


# Each of a rich table's columns takes a border or separator and a space
# either side; one more for the closing border.
_COLUMN_OVERHEAD = 3
_TABLE_HEADERS = (
    "weight",
    "blocks",
    "x",
    "shape",
    "spec",
    "shard",
    SIZE_MEANING.replace(", ", ",\n").replace("blocks ", "blocks\n"),
    "decision",
)


def _table_layout(rows, width):
    """The table's column widths, or `None` where it does not fit `width`.

    Every column but the decision's is as wide as its widest entry; the
    blocks column takes two lines a row (`decoder_block` over `0-17`)
    where one does not leave room for the decisions.
    """
    if not rows:
        return None
    columns = [
        [row.name for row in rows],
        None,
        [str(row.count) for row in rows],
        [str(row.weight.shape) for row in rows],
        [format_spec(row.weight.spec) for row in rows],
        [str(row.weight.shard_shape) for row in rows],
        [row.size for row in rows],
    ]
    decisions = [row.decision for row in rows]
    # Wide enough for every decision word, and for a reason where any.
    # A continuation line is indented by 2.
    decision_width = 2 + max(
        len(word)
        for text in decisions
        for word in _GLUED_SPACE.sub(_NO_BREAK, text).split(" ")
    )
    if any(row.weight.decision != "sharded" for row in rows):
        decision_width = max(decision_width, MIN_DECISION_WIDTH)
    overhead = _COLUMN_OVERHEAD * len(_TABLE_HEADERS) + 1
    for one_line in (True, False):
        if one_line:
            blocks = [row.blocks for row in rows]
        else:
            blocks = _stacked_blocks([row.blocks for row in rows])
        columns[1] = blocks
        widths = [
            max(
                len(line)
                for text in (header, *entries)
                for line in text.split("\n")
            )
            for header, entries in zip(_TABLE_HEADERS, columns, strict=False)
        ]
        room = width - overhead - sum(widths)
        if room >= decision_width:
            return blocks, widths, room
    return None


def _stacked_blocks(labels):
    """`decoder_block 0-17` as the layer's name over its index ranges."""
    layers = [label.partition(" ")[0] for label in labels]
    width = max(len(_TABLE_HEADERS[1]), *map(len, layers))
    stacked = []
    for layer, label in zip(layers, labels, strict=True):
        ranges = label.partition(" ")[2]
        wrapped = textwrap.wrap(ranges, width, break_on_hyphens=False)
        stacked.append("\n".join([layer, *wrapped]))
    return stacked


def _print_table(console, title, rows, blocks, widths, decision_width):
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title))
    for header, column_width in zip(
        _TABLE_HEADERS, [*widths, decision_width], strict=True
    ):
        numeric = header == _TABLE_HEADERS[6]
        table.add_column(
            header,
            width=column_width,
            no_wrap=True,
            justify="right" if numeric else "left",
        )
    for row, blocks_text in zip(rows, blocks, strict=True):
        cells = (
            row.name,
            blocks_text,
            str(row.count),
            str(row.weight.shape),
            format_spec(row.weight.spec),
            str(row.weight.shard_shape),
            row.size,
            wrap_words(row.decision, decision_width, indent="  "),
        )
        # Text, not markup: a name or reason may hold brackets.
        table.add_row(*map(Text, cells), style=row.style)
    console.print(table)


def entry_name(template, indices):
    """`attention/key/kernel  decoder_block 0-17` for a folded template."""
    row = _Row.of(template, len(indices), None, indices)
    return f"{row.name}  {row.blocks}" if row.blocks else row.name


def decision_text(weight):
    """`sharded`, or the decision and its reason."""
    if weight.decision == "sharded":
        return weight.decision
    return f"{weight.decision}: {weight.reason}"


def index_ranges(indices):
    """`[0, 1, 2, 5]` -> `"0-2, 5"`."""
    ranges, start = [], None
    for position, index in enumerate(sorted(indices)):
        if start is None:
            start = previous = index
        elif index == previous + 1:
            previous = index
        else:
            ranges.append((start, previous))
            start = previous = index
        if position == len(indices) - 1:
            ranges.append((start, previous))
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)
