"""Collectives XLA inserts for our layouts, keras-hub's, and an alternative.

For scaled-down configs that keep real head counts (see
`_sharded_configs.py`), on 8 fake CPU devices, compiles a forward pass and a
training step (next-token cross-entropy, gradients of every trainable
variable) under:
- ours: `Cls.get_layout_map(mesh)` from keras_nlp;
- keras-hub: `keras_hub.models.Cls.get_layout_map(mesh)` on keras-hub's
  backbone of the same config, where keras-hub has a map;
- before: our map as it was before the communication work (replication
  wherever heads do not divide, no activation layouts, separate q/k/v and
  gate/up matmuls), measured in the same run;
- alternative: our map with every weight that our plan replicates on the
  model axis (heads that do not divide it) sharding its hidden dimension on
  the model axis instead.
It reads the collectives from the compiled HLO text and prints them next to
the analytic minimum of tensor parallelism.

Meshes of three sizes are `(batch, expert, model)` for the
mixture-of-experts configs (experts on the expert axis) and `(data, fsdp,
model)` for the others (the batch split over data and fsdp, weights over
fsdp and model).

Run: python benchmarks/collectives.py [--mesh 1x8 2x4 1x4x2 2x2x2]
    [--only mixtral] [--output out.md]
"""

import argparse
import collections
import math
import re
import time

if __name__ == "__main__":
    # Fake devices must be requested before JAX is imported.
    from _sharded_configs import setup_devices

    setup_devices()

KINDS = (
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
)
SHORT = {
    "all-reduce": "AR",
    "all-gather": "AG",
    "reduce-scatter": "RS",
    "all-to-all": "A2A",
    "collective-permute": "CP",
}
DTYPE_BYTES = {
    "pred": 1,
    "s4": 0.5,
    "u4": 0.5,
    "s8": 1,
    "u8": 1,
    "s16": 2,
    "u16": 2,
    "f16": 2,
    "bf16": 2,
    "s32": 4,
    "u32": 4,
    "f32": 4,
    "s64": 8,
    "u64": 8,
    "f64": 8,
    "c64": 8,
    "c128": 16,
}
# `%name = <shape> <kind>[-start|-done](<operands>)`; the lookbehind keeps
# `ragged-all-to-all` from counting as `all-to-all`.
_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<shape>.*?)\s"
    r"(?<![\w-])(?P<kind>" + "|".join(KINDS) + r")(?P<phase>-start|-done)?"
    r"\((?P<operands>.*)"
)
# The first operand's name: `%x` or, after its shape (older printers), `x`.
_OPERAND = re.compile(r"%?([A-Za-z_][\w.\-]*)\s*[,)]")
_ARRAY = re.compile(r"\b([a-z]+\d*(?:e\d+m\d+\w*)?)\[([\d,]*)\]")

Collective = collections.namedtuple("Collective", ["count", "bytes"])


def shape_bytes(shape):
    """Bytes of an HLO shape string; a tuple shape sums its arrays.

    `"(f32[8,64]{1,0}, bf16[4])"` -> 8 * 64 * 4 + 4 * 2. Element types
    without a size (`token`) count 0; fp8 types count 1 byte.
    """
    total = 0
    for dtype, dims in _ARRAY.findall(shape):
        size = DTYPE_BYTES.get(dtype, 1 if dtype.startswith("f8") else 0)
        for dim in filter(None, dims.split(",")):
            size *= int(dim)
        total += size
    return int(total)


def collective_stats(hlo_text):
    """Counts collectives and their bytes in (compiled) HLO text.

    One instruction is one collective, even when XLA combined several
    arrays into a tuple-shaped one; its bytes are the sum of its result
    arrays (per device: an all-reduce's full tensor, an all-gather's
    gathered tensor, a reduce-scatter's scattered piece). An async pair
    counts once, at its `-start`, with the bytes of its `-done`'s result
    (a `-start` tuple also holds the operands and context buffers).

    Args:
        hlo_text: str, e.g. `jitted.lower(...).compile().as_text()`.

    Returns:
        dict kind -> `Collective(count, bytes)` for every kind in `KINDS`.
    """
    starts = {}
    done_bytes = {}
    stats = {kind: [0, 0] for kind in KINDS}
    for line in hlo_text.splitlines():
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        kind, phase = match["kind"], match["phase"]
        nbytes = shape_bytes(match["shape"])
        if phase == "-done":
            operand = _OPERAND.search(match["operands"])
            if operand:
                done_bytes[operand[1]] = nbytes
        elif phase == "-start":
            starts[match["name"]] = (kind, nbytes)
        else:
            stats[kind][0] += 1
            stats[kind][1] += nbytes
    for name, (kind, start_bytes) in starts.items():
        stats[kind][0] += 1
        stats[kind][1] += done_bytes.get(name, start_bytes)
    return {kind: Collective(*stats[kind]) for kind in KINDS}


def minimum_bytes(config, mesh_shape, kind, param_bytes, fsdp=False):
    """Analytic minimum collective bytes per device for tensor parallelism.

    In result bytes of the collectives on one device (what the table
    counts), with `A = batch / batch shards x sequence x hidden x 4` the
    bytes of this device's slice of the residual stream and `P` the
    trainable parameter bytes:

    - Megatron tensor parallelism all-reduces the residual stream twice per
      block forward (after attention and after the MLP) and twice more
      backward (the q/k/v and gate/up input gradients): `2 L A` forward,
      `4 L A` for a training step.
    - The vocabulary-sharded token embedding's lookup is one more forward
      all-reduce of `A`, and the tied (or untied) output projection's
      input gradient one more backward: `+A` forward, `+2A` training.
    - With a batch axis > 1 the weights are sharded FSDP-style over it
      (the hidden dimension): as in ZeRO-3, a training step all-gathers
      each weight's model-axis shard forward and again backward (`2 P / m`
      bytes gathered; keeping the forward's copy would cost the memory
      FSDP saves) and reduce-scatters its gradient (`P / (m x d)` bytes
      out); a forward pass gathers once (`P / m`). Norm scales and
      biases, replicated on the batch axis, are left out (under 0.1% of
      `P` here).

    Here `m` is the model axis (on a (batch, expert, model) mesh, the
    (expert, model) group, which plays its part) and `d` the batch axes.
    On a (data, fsdp, model) mesh only fsdp shards weights: the gathers
    run over fsdp and the gradients are reduce-scattered over fsdp and
    all-reduced over data (`P / (m x f)` more).
    """
    from _sharded_configs import BATCH
    from _sharded_configs import SEQUENCE

    if fsdp:
        data, fsdp_size, parallel = mesh_shape
        batch_shards = data * fsdp_size
        weight_shards = fsdp_size
    else:
        data, *parallel = mesh_shape
        parallel = math.prod(parallel)
        batch_shards = weight_shards = data
        data = 1
    activation = BATCH // batch_shards * SEQUENCE * config["hidden_dim"] * 4
    if parallel == 1:
        total = 0
    elif kind == "forward":
        total = (2 * config["num_layers"] + 1) * activation
    else:
        total = (4 * config["num_layers"] + 2) * activation
    if weight_shards > 1:
        # ZeRO-3: gathered forward, gathered again backward (not kept).
        gathers = 1 if kind == "forward" else 2
        total += gathers * param_bytes / parallel
        if kind == "train":
            total += param_bytes / (parallel * weight_shards)
    if kind == "train" and data > 1:
        total += param_bytes / (parallel * weight_shards)
    return total


def _cell(stat):
    if not stat.count:
        return "0"
    return f"{stat.count} ({stat.bytes / 1e6:.2f})"


def _failure(error):
    text = " ".join(str(error).split())
    # JAX's sharding errors start with the whole mesh; keep the spec and
    # the shape that broke it.
    text = re.sub(r"mesh=Mesh\(.*?\)\), ", "", text)
    text = re.sub(r", memory_kind=\w+", "", text)
    return f"crash: {type(error).__name__}: {text[:200]}"


def measure(step, config, mesh_shape, param_bytes, fsdp=False):
    """Rows of `(pass, stats, minimum)` for one built backbone."""
    rows = []
    for kind in ("forward", "train"):
        stats = collective_stats(step.compiled_text(kind))
        minimum = minimum_bytes(config, mesh_shape, kind, param_bytes, fsdp)
        rows.append((kind, stats, minimum))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--mesh", nargs="+", default=["1x8", "2x4", "1x4x2", "2x2x2"]
    )
    parser.add_argument(
        "--only", help="measure the configs whose name contains this text"
    )
    parser.add_argument("--output", help="also write the tables to this file")
    args = parser.parse_args()

    import _sharded_configs as shared

    meshes = [tuple(int(n) for n in mesh.split("x")) for mesh in args.mesh]
    header = (
        "| config | mesh | layout | pass | "
        + " | ".join(SHORT[kind] for kind in KINDS)
        + " | total MB | minimum MB | ratio | params MB/device |"
    )
    lines = [header, "|---|---|---|---|" + "---:|" * (len(KINDS) + 4)]
    notes = []
    start = time.perf_counter()

    def emit(name, mesh_shape, layout, rows, param_bytes):
        for kind, stats, minimum in rows:
            total = sum(stat.bytes for stat in stats.values())
            ratio = f"{total / minimum:.2f}" if minimum else "-"
            lines.append(
                f"| {name} | {shared.mesh_name(mesh_shape)} | {layout} | "
                f"{kind} | "
                + " | ".join(_cell(stats[k]) for k in KINDS)
                + f" | {total / 1e6:.2f} | {minimum / 1e6:.2f} | {ratio} | "
                f"{param_bytes / 1e6:.2f} |"
            )
            print(lines[-1], flush=True)

    def emit_missing(name, mesh_shape, layout, reason):
        lines.append(
            f"| {name} | {shared.mesh_name(mesh_shape)} | {layout} | "
            f"{reason} |" + " |" * (len(KINDS) + 4)
        )
        print(lines[-1], flush=True)

    for name, (class_name, config) in shared.CONFIGS.items():
        if args.only and args.only not in name:
            continue
        ours = shared.our_class(class_name)
        hub = shared.hub_class(class_name)
        experts = "num_experts" in config
        for mesh_shape in meshes:
            if len(mesh_shape) == 3 and mesh_shape[0] == 1 and not experts:
                continue  # (1, fsdp, model) is 2x4 with other names
            mesh = shared.device_mesh(mesh_shape, experts=experts)
            fsdp = len(mesh_shape) == 3 and not experts
            layouts = [
                ("ours", ours, shared.our_layout_map(ours, config, mesh), 1),
                (
                    "before",
                    ours,
                    shared.our_layout_map(ours, config, mesh, before=True),
                    0,
                ),
            ]
            param_bytes = layouts[0][2].plan.total_bytes
            if len(mesh_shape) == 2:
                alternative, changed = shared.alternative_layout_map(
                    ours, config, mesh
                )
                if changed:
                    layouts.append(("alternative", ours, alternative, 1))
                    notes.append(
                        f"{name} on {shared.mesh_name(mesh_shape)}: the "
                        f"alternative shards the hidden dim of {len(changed)} "
                        f"weights on 'model', e.g. {changed[0]}"
                    )
            if len(mesh_shape) == 3:
                emit_missing(
                    name,
                    mesh_shape,
                    "keras-hub",
                    f"no {'expert' if experts else 'fsdp'} axis in keras-hub",
                )
            elif hasattr(hub, "get_layout_map"):
                try:
                    layouts.append(
                        ("keras-hub", hub, hub.get_layout_map(mesh), 1)
                    )
                except Exception as error:
                    emit_missing(name, mesh_shape, "keras-hub", _failure(error))
            else:
                emit_missing(name, mesh_shape, "keras-hub", "none")
            for layout, cls, layout_map, fused in layouts:
                try:
                    backbone, distribution = shared.build(
                        cls, config, layout_map
                    )
                    step = shared.Step(backbone, distribution, fused=fused)
                    rows = measure(step, config, mesh_shape, param_bytes, fsdp)
                except Exception as error:
                    emit_missing(name, mesh_shape, layout, _failure(error))
                    continue
                emit(
                    name, mesh_shape, layout, rows, step.param_bytes_per_device
                )
                del backbone, step
    elapsed = time.perf_counter() - start
    legend = (
        "Cells: count (MB) per kind, from the compiled HLO of one device's "
        "program (MB = 10^6 bytes of the collectives' results). "
        "Layouts: ours = our layout map (policy auto, activation layouts, "
        "q/k/v and gate/up as one matmul where sharded); before = the same "
        "without those three (replication wherever heads do not divide, no "
        "activation layouts, separate matmuls), i.e. before issue 17. "
        "Meshes: AxB = (batch, model); three sizes = (batch, expert, model) "
        "for the mixture-of-experts configs, (data, fsdp, model) for the "
        "others. Minimum (see `minimum_bytes`): A = this device's slice of "
        "the residual stream (batch / batch shards x sequence x hidden x 4 "
        "bytes), L blocks, P parameter bytes, m model (or expert x model) "
        "shards, d weight-sharding batch shards: forward (2L + 1) A, train "
        "(4L + 2) A (two all-reduces per block each way, the embedding "
        "lookup forward, the output projection's input gradient backward); "
        "plus, when weights are sharded over a batch axis, P / m gathered "
        "(train: twice, as ZeRO-3) and (train) P / (m d) reduce-scattered; "
        "on (data, fsdp, model) "
        "also P / (m d) all-reduced over data. "
        f"Batch {shared.BATCH}, sequence {shared.SEQUENCE}, float32. "
        f"Measured in {elapsed:.0f} s."
    )
    table = "\n".join(lines)
    print()
    print(table)
    print()
    print(legend)
    for note in notes:
        print("-", note)
    if args.output:
        with open(args.output, "w") as file:
            file.write(table + "\n\n" + legend + "\n\n")
            file.writelines(f"- {note}\n" for note in notes)


if __name__ == "__main__":
    main()
