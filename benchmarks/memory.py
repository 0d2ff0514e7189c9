"""Per-device parameter memory of our plans and of keras-hub's layout maps.

For every built-in preset and every (batch, model) mesh, prints the largest
per-device parameter bytes over the ideal (total bytes / devices) twice: for
our plan (`Backbone.plan_layout`) and for the layout map that keras-hub's
class of the same name returns, applied to the same variable paths and
shapes the way Keras applies a `LayoutMap`. A keras-hub cell reads `crash`
when JAX would refuse a layout or Keras would find two keys for one path,
and `none` when keras-hub's class has no layout map. Nothing is allocated:
shapes come from abstract builds, and keras-hub's maps only need a
`DeviceMesh` over 8 fake CPU devices.

Run: python benchmarks/memory.py [--mesh 1x2 2x4] [--preset gemma llama3]
    [--output benchmarks/memory.md]
"""

if __name__ == "__main__":
    # keras-hub's maps need real (fake CPU) devices for their DeviceMesh;
    # they must be requested before JAX is imported.
    from _sharded_configs import setup_devices

    setup_devices()

import argparse  # noqa: E402
import collections  # noqa: E402
import dataclasses  # noqa: E402
import importlib  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

import keras  # noqa: E402

from keras_nlp.distribution import MeshShape  # noqa: E402
from keras_nlp.distribution.backbone_planner import backbone_variables  # noqa: E402
from keras_nlp.distribution.layout_plan import dtype_itemsize  # noqa: E402
from keras_nlp.models import Backbone  # noqa: E402

MESHES = ["1x2", "1x4", "1x8", "2x4", "4x2", "8x1"]
AXIS_NAMES = ("batch", "model")
OK = "ok"
CRASH = "crash"
NONE = "none"


class MultipleKeysError(ValueError):
    """More than one layout map key matches a path (Keras raises)."""

    def __init__(self, path, keys):
        super().__init__(f"{path} matches {len(keys)} keys: {keys}")
        self.keys = keys


class IndivisibleError(ValueError):
    """A spec JAX would refuse for a shape on a mesh."""


def keras_lookup(layout_specs, path):
    """Finds the key and spec Keras's `LayoutMap[path]` would use.

    Mirrors `LayoutMap.__getitem__` of Keras 3.15: a key equal to the path
    wins outright; otherwise every key is tried as a regex with
    `re.fullmatch`. Exactly one match gives that key's layout, none gives
    `None` (the variable is then replicated), more than one raises.

    Args:
        layout_specs: dict of key -> spec (a tuple with one entry per
            dimension: `None`, a mesh axis name or a tuple of them), in the
            map's insertion order.
        path: a variable path such as `decoder_block_0/attention/key/kernel`.

    Returns:
        `(key, spec)`, or `(None, None)` when no key matches.

    Raises:
        MultipleKeysError: when several keys match the path.
    """
    if path in layout_specs:
        return path, layout_specs[path]
    keys = [key for key in layout_specs if re.fullmatch(key, path)]
    if len(keys) > 1:
        raise MultipleKeysError(path, keys)
    if keys:
        return keys[0], layout_specs[keys[0]]
    return None, None


def _entry_axes(entry):
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, (tuple, list)) else (entry,)


def shard_shape(shape, spec, axis_sizes):
    """The per-device shape of a variable of `shape` laid out as `spec`.

    Each dimension is divided by the product of the sizes of the mesh axes
    its spec entry names. A spec shorter than the shape leaves the trailing
    dimensions whole, as a JAX `PartitionSpec` does.

    Args:
        shape: tuple of ints.
        spec: tuple, one entry per leading dimension: `None`, a mesh axis
            name or a tuple of names.
        axis_sizes: dict of mesh axis name -> size.

    Returns:
        A tuple of ints.

    Raises:
        IndivisibleError: where JAX would refuse the layout: a spec longer
            than the shape, an unknown or repeated mesh axis, or a dimension
            its mesh axes do not divide.
    """
    if len(spec) > len(shape):
        raise IndivisibleError(
            f"spec has {len(spec)} entries for a rank-{len(shape)} weight"
        )
    used = [axis for entry in spec for axis in _entry_axes(entry)]
    for axis in used:
        if axis not in axis_sizes:
            raise IndivisibleError(f"{axis!r} is not a mesh axis")
    if len(set(used)) != len(used):
        raise IndivisibleError(f"a mesh axis is used twice in {spec}")
    result = list(shape)
    for dim, entry in enumerate(spec):
        axes = _entry_axes(entry)
        ways = math.prod(axis_sizes[axis] for axis in axes)
        if shape[dim] % ways:
            named = " x ".join(f"{a!r} ({axis_sizes[a]})" for a in axes)
            raise IndivisibleError(
                f"dim {dim} (size {shape[dim]}) is not divisible by {named}"
            )
        result[dim] = shape[dim] // ways
    return tuple(result)


def format_spec(spec):
    def text(entry):
        if isinstance(entry, (tuple, list)):
            return "(" + ", ".join(text(e) for e in entry) + ")"
        return str(entry)

    return "(" + ", ".join(text(entry) for entry in spec) + ")"


@dataclasses.dataclass(frozen=True)
class MapMemory:
    """Per-device parameter memory of one layout on one mesh.

    Attributes:
        status: `OK`, `CRASH` (JAX would refuse a spec, or Keras would find
            several keys for one path) or `NONE` (no layout map).
        ratio: max per-device bytes over total bytes / devices (`OK` only).
        failure: the first failing weight, its shape, spec and why
            (`CRASH` only).
        num_failing: how many weights fail (`CRASH` only).
        unmatched: paths of rank >= 2 weights that no key matches.
        unmatched_bytes: their bytes.
        total_bytes: bytes of the whole model.
    """

    status: str
    ratio: float = None
    failure: str = None
    num_failing: int = 0
    unmatched: tuple = ()
    unmatched_bytes: int = 0
    total_bytes: int = 0


def layout_memory(variables, lookup, axis_sizes):
    """Measures one layout on one mesh, as Keras and JAX would apply it.

    Args:
        variables: `VariableInfo`s (path, shape, dtype) of the model.
        lookup: callable path -> `(key, spec)`, `(None, None)` when nothing
            matches (the variable is replicated); may raise
            `MultipleKeysError`.
        axis_sizes: dict of mesh axis name -> size.

    Returns:
        A `MapMemory` with status `OK` or `CRASH`.
    """
    devices = math.prod(axis_sizes.values())
    total = per_device = unmatched_bytes = 0
    unmatched, failures = [], []
    for variable in variables:
        itemsize = dtype_itemsize(variable.dtype)
        size = math.prod(variable.shape) * itemsize
        total += size
        try:
            key, spec = lookup(variable.path)
        except MultipleKeysError as error:
            failures.append(
                f"`{variable.path}` {variable.shape}: matches "
                f"{len(error.keys)} keys "
                + ", ".join(f"`{key}`" for key in error.keys)
            )
            continue
        if key is None:
            if len(variable.shape) >= 2:
                unmatched.append(variable.path)
                unmatched_bytes += size
            per_device += size
            continue
        try:
            shard = shard_shape(variable.shape, spec, axis_sizes)
        except IndivisibleError as error:
            failures.append(
                f"`{variable.path}` {variable.shape} spec "
                f"`{format_spec(spec)}`: {error}"
            )
            continue
        per_device += math.prod(shard) * itemsize
    common = dict(
        unmatched=tuple(unmatched),
        unmatched_bytes=unmatched_bytes,
        total_bytes=total,
    )
    if failures:
        return MapMemory(
            CRASH, failure=failures[0], num_failing=len(failures), **common
        )
    return MapMemory(OK, ratio=per_device / (total / devices), **common)


def keras_hub_layout_map_fn(class_name):
    """keras-hub's layout map function for `class_name`, or `None`.

    Looks for a `get_layout_map` on `keras_hub.models.<class_name>`
    (defined or inherited), then for a module-level `get_layout_map` in the
    module that defines the class.

    Returns:
        `(function, where)` with `where` naming the class or module that
        defines it, or `(None, reason)`.
    """
    import keras_hub

    hub_cls = getattr(keras_hub.models, class_name, None)
    if hub_cls is None:
        return None, f"keras_hub.models has no {class_name}"
    function = getattr(hub_cls, "get_layout_map", None)
    if function is not None:
        return function, function.__qualname__.split(".")[0]
    module = importlib.import_module(hub_cls.__module__)
    function = getattr(module, "get_layout_map", None)
    if callable(function):
        return function, f"{module.__name__}.get_layout_map"
    return None, f"{class_name} defines no layout map"


def device_mesh(mesh):
    devices = keras.distribution.list_devices()
    if len(devices) < mesh.num_devices:
        raise SystemExit(
            f"Mesh {mesh.shape} needs {mesh.num_devices} devices; "
            f"{len(devices)} found. Set XLA_FLAGS="
            "--xla_force_host_platform_device_count=8 before JAX is "
            "imported."
        )
    return keras.distribution.DeviceMesh(
        mesh.shape, mesh.axis_names, devices[: mesh.num_devices]
    )


def layout_specs(layout_map):
    """A Keras `LayoutMap` as an ordered dict of key -> axes tuple."""
    return {key: tuple(layout_map[key].axes) for key in layout_map}


def keras_hub_memory(class_name, variables, mesh, cache):
    """keras-hub's map for `class_name` applied to our variables on `mesh`.

    Args:
        class_name: e.g. `"GemmaBackbone"`.
        variables: `VariableInfo`s of our backbone.
        mesh: a `MeshShape` with axes `("batch", "model")`.
        cache: dict reused across calls, so each map is made once per mesh.

    Returns:
        `(MapMemory, where)`, `where` naming what defines the map (or why
        there is none).
    """
    function, where = keras_hub_layout_map_fn(class_name)
    if function is None:
        return MapMemory(NONE), where
    key = (class_name, mesh.shape)
    if key not in cache:
        cache[key] = layout_specs(function(device_mesh(mesh)))
    specs = cache[key]
    memory = layout_memory(
        variables, lambda path: keras_lookup(specs, path), mesh.axis_sizes
    )
    return memory, where


def our_memory(plan, variables, mesh):
    """Our plan measured by the same yardstick as keras-hub's maps."""
    specs = {weight.path: tuple(weight.spec) for weight in plan.weights}
    memory = layout_memory(
        variables,
        lambda path: (path, specs[path]),
        mesh.axis_sizes,
    )
    # The plan's own total must agree with the measurement, or the two
    # columns would not be comparable.
    if memory.status != OK or abs(memory.ratio - plan.memory_ratio) > 1e-9:
        raise AssertionError(
            f"{plan.preset}: measured {memory} but the plan says "
            f"{plan.memory_ratio}"
        )
    return memory


def _group_paths(paths):
    """E.g. `transformer_layer_N/self_attention/query/bias x28`."""
    counts = collections.Counter(re.sub(r"_\d+/", "_N/", p) for p in paths)
    return ", ".join(
        f"`{path}`" + (f" x{n}" if n > 1 else "") for path, n in counts.items()
    )


class Footnotes:
    """Numbers distinct footnote texts in order of first use."""

    def __init__(self):
        self.texts = {}

    def ref(self, text):
        if text not in self.texts:
            self.texts[text] = len(self.texts) + 1
        return f"[{self.texts[text]}]"

    def lines(self):
        return [f"{n}. {text}" for text, n in self.texts.items()]


def hub_cell(memory, footnotes):
    if memory.status == OK:
        return f"{memory.ratio:.3f}"
    if memory.status == NONE:
        return NONE
    more = (
        f"; {memory.num_failing} weights fail in all"
        if memory.num_failing > 1
        else ""
    )
    return CRASH + footnotes.ref(memory.failure + more)


def measure(presets, meshes):
    """Yields `(preset, class, where, {mesh_name: (ours, hub)})` rows."""
    cache = {}
    for preset in presets:
        owner, config = Backbone._preset_config(preset)
        variables = backbone_variables(owner, config)
        cells = {}
        where = None
        for mesh_name, mesh in meshes.items():
            plan = Backbone.plan_layout(mesh, preset=preset)
            ours = our_memory(plan, variables, mesh)
            hub, where = keras_hub_memory(
                owner.__name__, variables, mesh, cache
            )
            cells[mesh_name] = (ours, hub)
        yield preset, owner.__name__, where, cells


def render(rows, mesh_names):
    footnotes = Footnotes()
    lines = [
        "Max per-device parameter bytes / ideal (total bytes / devices), "
        "ours / keras-hub's `get_layout_map` applied to the same paths "
        "and shapes. `crash`: JAX would refuse a spec (or Keras would find "
        "two keys for one path); `none`: keras-hub's class has no layout "
        "map.",
        "",
        "| preset | " + " | ".join(mesh_names) + " |",
        "|---|" + "---:|" * len(mesh_names),
    ]
    for preset, _, _, cells in rows:
        texts = []
        for mesh_name in mesh_names:
            ours, hub = cells[mesh_name]
            hub_text = hub_cell(hub, footnotes)
            texts.append(f"{ours.ratio:.3f} / {hub_text}")
        lines.append(f"| {preset} | " + " | ".join(texts) + " |")
    if footnotes.texts:
        lines += ["", "First weight JAX or Keras would refuse:", ""]
        lines += footnotes.lines()

    mapped = [row for row in rows if row[3][mesh_names[0]][1].status != NONE]
    if mapped:
        lines += [
            "",
            "Rank >= 2 weights that match no key of keras-hub's map, so "
            "Keras replicates them on every device (on every mesh):",
            "",
            "| preset | keras-hub map | unmatched weights | share of bytes |",
            "|---|---|---|---:|",
        ]
        for preset, class_name, where, cells in mapped:
            hub = cells[mesh_names[0]][1]
            if where != class_name:
                where += f" (inherited by {class_name})"
            share = hub.unmatched_bytes / hub.total_bytes
            lines.append(
                f"| {preset} | {where} | "
                f"{_group_paths(hub.unmatched) or '-'} | {share:.2%} |"
            )

    lines += [
        "",
        f"Per mesh, over {len(rows)} presets: how keras-hub's maps fare, "
        "and the worst ratio of each side.",
        "",
        "| mesh | keras-hub ok | crash | none | worst ours | "
        "worst ours where keras-hub has a map | worst keras-hub (ok) |",
        "|---|---:|---:|---:|---|---|---|",
    ]

    def worst(candidates, mesh_name, side):
        if not candidates:
            return "-"
        row = max(candidates, key=lambda row: row[3][mesh_name][side].ratio)
        return f"{row[3][mesh_name][side].ratio:.3f} ({row[0]})"

    for mesh_name in mesh_names:
        counts = collections.Counter(
            row[3][mesh_name][1].status for row in rows
        )
        ok = [row for row in rows if row[3][mesh_name][1].status == OK]
        lines.append(
            f"| {mesh_name} | {counts[OK]} | {counts[CRASH]} | "
            f"{counts[NONE]} | {worst(rows, mesh_name, 0)} | "
            f"{worst(mapped, mesh_name, 0)} | {worst(ok, mesh_name, 1)} |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mesh", nargs="+", default=MESHES)
    parser.add_argument(
        "--preset",
        nargs="+",
        help="keep presets whose name contains any of these strings",
    )
    parser.add_argument("--output", help="also write the markdown here")
    args = parser.parse_args()

    meshes = {name: MeshShape.parse(name, AXIS_NAMES) for name in args.mesh}
    presets = [
        preset
        for preset in Backbone._available_presets()
        if not args.preset or any(text in preset for text in args.preset)
    ]
    if not presets:
        parser.error(f"no built-in preset matches {args.preset}")

    start = time.perf_counter()
    rows = []
    for row in measure(presets, meshes):
        rows.append(row)
        print(f"measured {row[0]}", flush=True)
    text = render(rows, args.mesh)
    print()
    print(text)
    print(
        f"\n{len(rows)} presets x {len(meshes)} meshes in "
        f"{time.perf_counter() - start:.1f} s"
    )
    if args.output:
        with open(args.output, "w") as file:
            file.write(
                "<!-- Generated by `python benchmarks/memory.py --output "
                "benchmarks/memory.md`. -->\n\n" + text + "\n"
            )


if __name__ == "__main__":
    main()
