"""The plan as terminal text (`LayoutPlan.print`): names whole at any width."""

import functools
import io
import re

import pytest
from rich.console import Console

from keras_nlp.distribution import MeshShape
from keras_nlp.distribution.plan_text import PIPED_WIDTH
from keras_nlp.distribution.plan_text import SIZE_MEANING
from keras_nlp.distribution.plan_text import plan_console
from keras_nlp.distribution.plan_text import wrap_words
from keras_nlp.models import Backbone

# A line that ends in a bare number (`41`), its unit wrapped away.
NUMBER_AT_END = re.compile(r"(^|\s)\d[\d.,]*$")


@functools.cache
def preset_plan(preset):
    """The preset's plan on (batch, expert, model) 1x4x2, 10 blocks deep.

    Its names, shapes, specs and reasons are the full preset's (a block
    range reads `0-9`, not `0-17`), at a third of the planning time.
    """
    owner, config = Backbone._preset_config(preset)
    return owner.plan_layout(
        MeshShape.parse("1x4x2"), config={**config, "num_layers": 10}
    )


def printed(plan, width):
    console = Console(width=width, record=True, file=io.StringIO())
    plan.print(console=console)
    return console.export_text().splitlines()


def name_in_block(path):
    """`decoder_block_3/attention/key/kernel` -> `attention/key/kernel`."""
    return re.sub(r"^[^/]*?_\d+/", "", path)


# 240: wide enough for the table.
@pytest.mark.parametrize("width", [80, 100, 120, 160, 240])
@pytest.mark.parametrize(
    "preset", ["gemma_2b_en", "llama3_8b_en", "mixtral_8_7b_en"]
)
def test_every_weight_name_is_whole_at_every_width(preset, width):
    plan = preset_plan(preset)
    lines = printed(plan, width)
    assert max(map(len, lines)) <= width
    assert lines[0].strip() == f"{plan.backbone} on mesh {plan.mesh}"
    for path in {name_in_block(weight.path) for weight in plan.weights}:
        assert any(path in line for line in lines), (path, width)
    # Each repeated layer's blocks, whole on a line.
    last_block = {}
    for weight in plan.weights:
        block = re.match(r"^([^/]*?)_(\d+)/", weight.path)
        if block:
            layer, index = block.group(1), int(block.group(2))
            last_block[layer] = max(index, last_block.get(layer, 0))
    assert last_block
    for layer, last in last_block.items():
        assert any(f"{layer} 0-{last}" in line for line in lines), layer
    # The size column says what its figures are.
    header = [line.split("┃") for line in lines if line.startswith("┃")]
    if header:  # the table: the header is stacked in its column
        size_header = " ".join(cells[7].strip() for cells in header)
        assert " ".join(size_header.split()) == SIZE_MEANING
    else:
        assert lines[1].startswith("weight  blocks")
        assert lines[1].endswith(SIZE_MEANING)
    # Continuation lines are indented, and a number keeps its unit.
    for line, next_line in zip(lines, lines[1:], strict=False):
        if next_line.startswith(" ") and not line.startswith(("┃", "│")):
            assert not NUMBER_AT_END.search(line), (line, next_line)
    # The summary's content is all there, however it wraps.
    flat = " ".join(" ".join(lines).split())
    for line in plan.summary().splitlines():
        assert " ".join(line.split()) in flat, line


def test_a_long_summary_line_wraps_under_its_label():
    line = (
        "activations pinned:    110 layer outputs (56 row-parallel, 54 "
        "column-parallel), 41 MB/device"
    )
    wrapped = wrap_words(line, 60, indent=" " * 23).splitlines()
    assert wrapped[0].startswith("activations pinned:    110 layer")
    assert all(later.startswith(" " * 23) for later in wrapped[1:])
    assert " ".join(" ".join(wrapped).split()) == " ".join(line.split())
    # Neither `54 column-parallel` nor `41 MB/device` is split.
    for width in range(30, 90):
        text = wrap_words(line, width, indent="    ")
        assert "54 column-parallel" in text and "41 MB/device" in text


def test_columns_sets_the_width_of_a_pipe(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert plan_console(file=io.StringIO()).width == PIPED_WIDTH
    monkeypatch.setenv("COLUMNS", "137")
    assert plan_console(file=io.StringIO()).width == 137
