"""The plan as a picture: `LayoutPlan.to_svg` and `plan --svg`, rendered
by a real headless browser (Debian's `chromium-headless-shell`, which
`.ci/test` installs)."""

import colorsys
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ElementTree
import zlib

import pytest

from keras_nlp.cli import main
from keras_nlp.distribution import MeshShape
from keras_nlp.distribution.plan_svg import TEXT_CHARACTERS
from keras_nlp.distribution.plan_svg import WHOLE_COLOR
from keras_nlp.distribution.plan_svg import device_shards
from keras_nlp.models import GemmaBackbone

SVG = "{http://www.w3.org/2000/svg}"
BROWSERS = ("chromium-headless-shell", "chromium", "google-chrome")


def test_each_device_gets_the_shard_its_mesh_position_holds():
    mesh = MeshShape((2, 4), ("batch", "model"))
    # Heads on model, hidden on batch: 8 pieces, one per device.
    shards, count = device_shards(("model", "batch", None), mesh)
    assert count == 8 and sorted(shards) == list(range(8))
    # One key/value head: split by batch only, whole along model.
    shards, count = device_shards((None, "batch", None), mesh)
    assert count == 2 and shards == [0, 0, 0, 0, 1, 1, 1, 1]
    shards, count = device_shards((("batch", "model"),), mesh)
    assert count == 8 and shards == list(range(8))
    assert device_shards((None,), mesh) == ([0] * 8, 1)


@pytest.fixture(scope="module")
def gemma_svg(tmp_path_factory):
    path = tmp_path_factory.mktemp("svg") / "plan.svg"
    argv = ["plan", "gemma_2b_en", "--mesh", "2x4", "--svg", str(path)]
    assert main(argv) == 0
    return path


def test_one_row_per_weight_kind_with_a_square_per_device(gemma_svg):
    root = ElementTree.parse(gemma_svg).getroot()
    plan = GemmaBackbone.plan_layout(
        {"batch": 2, "model": 4}, preset="gemma_2b_en"
    )
    rows = root.findall(f"{SVG}g[@class='weight']")
    assert len(rows) == len(plan.grouped_rows())
    decisions = [row.get("data-decision") for row in rows]
    assert decisions == [w.decision for _, _, w in plan.grouped_rows()]
    for row in rows:
        assert len(row.findall(f"{SVG}g[@class='mesh']/{SVG}rect")) == 8
    title = root.find(f"{SVG}text[@class='title']").text
    assert title == "gemma_2b_en on mesh 2x4 (batch, model)"
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "attention/key/kernel  decoder_block 0-17  x18" in texts
    assert "(None, batch, None) -> shard (1, 1024, 256) in each block" in texts
    # The bytes of all 18 blocks, in the text table's words.
    assert "18.00 MiB per device, all blocks shown" in texts
    # Each reason whole, wrapped at a space into lines beside the grid.
    for row, (_, _, weight) in zip(rows, plan.grouped_rows(), strict=True):
        lines = [t.text for t in row.findall(f"{SVG}text")]
        after_decision = lines[lines.index(weight.decision) + 1 :]
        assert all(len(line) <= TEXT_CHARACTERS for line in after_decision)
        if weight.decision != "sharded":
            assert " ".join(" ".join(after_decision).split()) == " ".join(
                weight.reason.split()
            )


def test_sequence_layouts_are_noted():
    from keras_nlp.distribution.plan_svg import render_plan_svg

    mesh = MeshShape((1, 2, 4), ("batch", "context", "model"))
    plan = GemmaBackbone.plan_layout(
        mesh, preset="gemma_2b_en", sequence_parallel=True
    )
    text = render_plan_svg(plan, plan.grouped_rows()[:1], "gemma")
    assert (
        "Sequence: the residual stream split over 'context', 'model' "
        "(sequence parallel on the model axis); keys and values gathered "
        "over 'context'." in text
    )
    assert "KV caches: length split over 'context', 'model'." in text
    plain = GemmaBackbone.plan_layout(
        {"batch": 2, "model": 4}, preset="gemma_2b_en"
    )
    assert "Sequence:" not in render_plan_svg(
        plain, plain.grouped_rows()[:1], "gemma"
    )


def browser():
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(
        "No headless browser found (tried "
        + ", ".join(BROWSERS)
        + "). Install Debian's chromium-headless-shell "
        "(apt-get install chromium-headless-shell), as .ci/test does."
    )


def run_browser(*args):
    return subprocess.run(
        [browser(), "--headless", "--no-sandbox", "--disable-gpu", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


def png_pixels(path):
    """The RGB(A) rows of an 8-bit, non-interlaced PNG (a screenshot)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks = 8, {}
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        chunks.setdefault(kind, []).append(
            data[position + 8 : position + 8 + length]
        )
        position += 12 + length
    width, height, depth, color_type, _, _, interlace = struct.unpack(
        ">IIBBBBB", chunks[b"IHDR"][0]
    )
    assert depth == 8 and interlace == 0 and color_type in (2, 6)
    channels = 3 if color_type == 2 else 4
    raw = zlib.decompress(b"".join(chunks[b"IDAT"]))
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up = previous[x]
            corner = previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                estimate = left + up - corner
                nearest = min(
                    (abs(estimate - left), 0, left),
                    (abs(estimate - up), 1, up),
                    (abs(estimate - corner), 2, corner),
                )[2]
                line[x] = (line[x] + nearest) & 255
        rows.append(line)
        previous = line
    return [
        {tuple(row[x : x + 3]) for x in range(0, stride, channels)}
        for row in rows
    ]


def hsl_rgb(hue, saturation=0.65, lightness=0.55):
    red, green, blue = colorsys.hls_to_rgb(hue / 360, lightness, saturation)
    return tuple(round(255 * c) for c in (red, green, blue))


def near(color, colors, tolerance=3):
    return any(
        all(abs(a - b) <= tolerance for a, b in zip(color, c, strict=True))
        for c in colors
    )


def test_a_headless_browser_renders_the_grids(gemma_svg, tmp_path):
    # The browser's own parse: an SVG it cannot read renders an error page
    # instead of this DOM.
    dom = run_browser("--dump-dom", gemma_svg.as_uri())
    assert "gemma_2b_en on mesh 2x4 (batch, model)" in dom
    assert "fallback" in dom and "parsererror" not in dom
    screenshot = tmp_path / "plan.png"
    run_browser(
        f"--screenshot={screenshot}",
        "--window-size=1400,900",
        gemma_svg.as_uri(),
    )
    colors = set().union(*png_pixels(screenshot))
    gray = tuple(int(WHOLE_COLOR[i : i + 2], 16) for i in (1, 3, 5))
    # The norm scales' gray squares and all 8 shard colors of the query.
    assert near(gray, colors)
    for shard in range(8):
        assert near(hsl_rgb(round(360 * shard / 8)), colors), shard
