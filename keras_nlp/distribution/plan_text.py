"""A plan as text for a terminal: a `rich` table, or entries when narrow.

Repeated blocks fold into one row per weight kind (`decoder_block_{i}`);
`plan_svg` draws the same rows as a picture. Plans come in as objects:
this module reads their attributes and imports nothing of theirs.
"""

import re
import textwrap

from keras_nlp.distribution.formatting import format_bytes
from keras_nlp.distribution.rules import format_spec

# Below this console width a plan prints as wrapped entries, not a table.
TABLE_WIDTH = 120
# A row's color by its weight's decision; "sharded" is plain.
DECISION_STYLES = {
    "fallback": "yellow",
    "alternative": "cyan",
    "replicated": "dim",
    "user": "magenta",
}


def folded_rows(weights):
    """`(template, count, WeightPlan, block indices)` per weight kind.

    Weights that differ only in the block index of their leading layer
    name (and share shape, spec and reason) fold into one row.
    """
    groups = {}
    for weight in weights:
        # Only the leading layer name carries the block index.
        match = re.match(r"^([^/]*?)_(\d+)(?=/)", weight.path)
        template, index = weight.path, None
        if match:
            template = f"{match.group(1)}_{{i}}" + weight.path[match.end() :]
            index = int(match.group(2))
        key = (template, weight.shape, weight.spec, weight.reason)
        if key not in groups:
            groups[key] = [template, 0, weight, []]
        groups[key][1] += 1
        if index is not None:
            groups[key][3].append(index)
    return [tuple(row) for row in groups.values()]


def plan_title(plan):
    return f"{plan.preset or plan.backbone} on mesh {plan.mesh}"


def print_plan(plan, console=None, all_weights=False):
    """Prints `plan`'s weights and then its summary (see `LayoutPlan.print`)."""
    from rich.console import Console

    console = console or Console()
    if all_weights:
        rows = [(weight.path, 1, weight, []) for weight in plan.weights]
    else:
        rows = folded_rows(plan.weights)
    if console.width >= TABLE_WIDTH:
        _print_table(console, plan_title(plan), rows)
    else:
        _print_entries(console, plan_title(plan), rows)
    console.print(plan.summary())


def _print_table(console, title, rows):
    from rich.table import Table

    table = Table(title=title)
    for column in ("weight", "x", "shape", "spec", "shard", "per device"):
        table.add_column(column, no_wrap=column != "weight")
    table.add_column("decision")
    for template, count, weight, _ in rows:
        table.add_row(
            template,
            str(count),
            str(weight.shape),
            format_spec(weight.spec),
            str(weight.shard_shape),
            format_bytes(weight.shard_bytes * count),
            _decision_text(weight),
            style=DECISION_STYLES.get(weight.decision),
        )
    console.print(table)


def _print_entries(console, title, rows):
    from rich.text import Text

    width = console.width
    console.print(Text(title, style="bold"))
    for template, count, weight, indices in rows:
        size = format_bytes(weight.shard_bytes * count)
        head = entry_name(template, indices)
        gap = max(2, width - len(head) - len(size))
        console.print(
            Text(head + " " * gap + size, style="bold"),
            no_wrap=False,
            overflow="fold",
        )
        body = textwrap.fill(
            f"{format_spec(weight.spec)}  {_decision_text(weight)}",
            width=width,
            initial_indent="  ",
            subsequent_indent="    ",
            break_on_hyphens=False,
        )
        console.print(Text(body, style=DECISION_STYLES.get(weight.decision)))


def entry_name(template, indices):
    """`attention/key/kernel  decoder_block 0-17` for a folded template."""
    if indices and "_{i}/" in template:
        block, name = template.split("_{i}/", 1)
        return f"{name}  {block} {_index_ranges(indices)}"
    return template


def _decision_text(weight):
    if weight.decision == "sharded":
        return weight.decision
    return f"{weight.decision}: {weight.reason}"


def _index_ranges(indices):
    """`[0, 1, 2, 5]` -> `"0-2,5"`."""
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
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)
