"""A training step with and without sequence parallelism, side by side.

A Llama-like (32 query : 8 key/value heads) and a Gemma-like (8 : 1)
decoder, two blocks each, on (1, 8) fake CPU devices: one training step
(`_sharded_configs.Step`: next-token loss and every gradient) at 8,192
tokens, as 1 x 8,192 and 8 x 1,024, compiled with the plan's all-reduce
pattern (`sequence_parallel=False`) and with the residual stream split over
the sequence (`True`). Printed per device, each pair from one run:

- temporaries: XLA's `memory_analysis().temp_size_in_bytes` of the
  compiled step (the activations held for the backward pass and the
  transient buffers; weights and gradients are arguments and outputs);
- the attention scores' share of it: `batch x heads / 8 x length^2`
  float32, one tensor per block (XLA's CPU attention holds its softmax
  for the backward pass; sequence parallelism does not change it, the
  heads already split it);
- link bytes of the collectives, counted from the compiled HLO: ring
  algorithms over the 8 devices, an all-reduce `2 (m - 1) / m` of its
  bytes, an all-gather, reduce-scatter or all-to-all `(m - 1) / m` of the
  whole array. XLA's CPU backend has no reduce-scatter: it all-reduces and
  each device keeps its slice (a `dynamic-slice` by `partition-id`, fused
  with what follows), which GPU and TPU XLA rewrite into a reduce-scatter.
  An all-reduced array whose every reader keeps a `1 / 8` slice indexed by
  the partition id is counted as the reduce-scatter it becomes there.

Nothing here is timed. Run:
    python benchmarks/sequence_parallel.py
        [--output benchmarks/sequence_parallel.md]
"""

import argparse
import math
import os
import re
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _sharded_configs import setup_devices

    setup_devices()

SHAPES = [(1, 8192), (8, 1024)]
CONFIGS = {
    "llama-like (32q:8kv)": (
        "Llama3Backbone",
        dict(
            vocabulary_size=2048,
            num_layers=2,
            num_query_heads=32,
            num_key_value_heads=8,
            hidden_dim=1024,
            intermediate_dim=2816,
        ),
    ),
    "gemma-like (8q:1kv)": (
        "GemmaBackbone",
        dict(
            vocabulary_size=2048,
            num_layers=2,
            num_query_heads=8,
            num_key_value_heads=1,
            hidden_dim=1024,
            intermediate_dim=4096,
            head_dim=128,
        ),
    ),
}
MIB = 2**20
NOTE = """\
Sequence parallelism turns each all-reduce of the residual stream into a
reduce-scatter and an all-gather: the link bytes stay the same (0.98 of
the all-reduce pattern's here). What it
removes is the residual-width activations held whole on every device of the
model axis; what it leaves is what the heads already split, above all the
attention scores, which XLA's CPU attention keeps for the backward pass
(`batch x heads / 8 x length^2` per block, several such tensors). So the
temporaries fall most where the scores weigh least (8 x 1,024), and a
fused attention that keeps no scores (cuDNN or Pallas flash attention on
GPU and TPU) is what leaves the rest to sequence parallelism."""
# `%name = <shape> all-reduce(` and the instructions that read `%name`.
_ALL_REDUCE = re.compile(
    r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*(.*?)\sall-reduce\("
)
_DEFINITION = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*(\S+)\s+(\S+)")


def _sliced_bytes(lines, name, nbytes, group):
    """`nbytes` if every reader of `%name` keeps its own slice of it (a
    result `1 / group` of it, indexed by `%partition-id`), else 0."""
    from collectives import shape_bytes

    users = [
        _DEFINITION.match(line)
        for line in lines
        if re.search(rf"%{re.escape(name)}[,)]", line)
        and not _DEFINITION.match(line)[1] == name
    ]
    if users and all(
        user
        and "%partition-id" in user.string
        and shape_bytes(user[2]) * group == nbytes
        for user in users
    ):
        return nbytes
    return 0


def link_bytes(hlo_text, group):
    """Per-device link bytes of the collectives in `hlo_text`, by kind,
    an all-reduce (or an array of a combined one) whose every reader keeps
    one device's slice counted as a reduce-scatter."""
    from collectives import collective_stats
    from collectives import shape_bytes

    lines = [line for line in hlo_text.splitlines() if _DEFINITION.match(line)]
    scattered = 0
    for line in lines:
        match = _ALL_REDUCE.match(line)
        if not match:
            continue
        name = match[1]
        if not match[2].startswith("("):
            scattered += _sliced_bytes(
                lines, name, shape_bytes(match[2]), group
            )
            continue
        # A combined all-reduce: each array through its get-tuple-element.
        for other in lines:
            element = _DEFINITION.match(other)
            if element[3].startswith("get-tuple-element(") and re.search(
                rf"%{re.escape(name)}\)", other
            ):
                scattered += _sliced_bytes(
                    lines, element[1], shape_bytes(element[2]), group
                )
    stats = collective_stats(hlo_text)
    ring = (group - 1) / group
    reduced = stats["all-reduce"].bytes - scattered
    return {
        "all-reduce": 2 * ring * reduced,
        "reduce-scatter": ring
        * (scattered + group * stats["reduce-scatter"].bytes),
        "all-gather": ring * stats["all-gather"].bytes,
        "all-to-all": ring * stats["all-to-all"].bytes,
    }


def measure(class_name, config, batch, length, sequence_parallel, mesh_axes):
    """`(temporaries, link bytes by kind or None, predicted activations)`
    of one training step; link bytes on one model axis only."""
    import _sharded_configs as shared
    import keras

    from keras_nlp.distribution.memory import Workload
    from keras_nlp.distribution.memory import estimate_memory

    cls = shared.our_class(class_name)
    shape, axes = mesh_axes
    devices = keras.distribution.list_devices()[: math.prod(shape)]
    mesh = keras.distribution.DeviceMesh(shape, axes, devices)
    layout_map = cls.get_layout_map(
        mesh, config=config, sequence_parallel=sequence_parallel
    )
    backbone, distribution = shared.build(cls, config, layout_map)
    shared.BATCH, shared.SEQUENCE = batch, length
    step = shared.Step(backbone, distribution)

    def compile_step():
        compiled = step.train.lower(*step.args).compile()
        return compiled.memory_analysis(), compiled.as_text()

    analysis, text = step._traced(compile_step)
    links = link_bytes(text, shape[-1]) if len(shape) == 2 else None
    predicted = estimate_memory(
        layout_map.plan, Workload("train", batch, length)
    ).categories["activations"]
    return analysis.temp_size_in_bytes, links, predicted


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args()
    lines = [
        "One training step on 8 fake CPU devices, per device: XLA's "
        "temporaries, the attention scores' share, the memory model's "
        "activations, and the collectives' link bytes (reduce-scatters as "
        "GPU/TPU XLA makes them). Off: the all-reduce pattern on 1x8; on: "
        "sequence parallelism on 1x8; CP: a (batch, context, model) mesh "
        "of 1x2x4 with sequence parallelism.",
        "",
        "| model | batch x length | temporaries off / on / CP (ratio to "
        "off) | one score tensor a block, off | predicted activations off "
        "/ on (ratio) | link MB off / on (ratio) | collectives on |",
        "|---|---|---|---:|---|---|---|",
    ]
    meshes = {
        "off": (((1, 8), ("batch", "model")), False),
        "on": (((1, 8), ("batch", "model")), True),
        "CP": (((1, 2, 4), ("batch", "context", "model")), True),
    }
    for label, (class_name, config) in CONFIGS.items():
        for batch, length in SHAPES:
            temps, links, predicted = {}, {}, {}
            for name, (mesh_axes, enabled) in meshes.items():
                temps[name], links[name], predicted[name] = measure(
                    class_name, config, batch, length, enabled, mesh_axes
                )
            heads = config["num_query_heads"] // 8
            scores = config["num_layers"] * batch * heads * length**2 * 4
            total = {k: sum(links[k].values()) for k in ("off", "on")}
            kinds = ", ".join(
                f"{kind} {value / 1e6:.0f}"
                for kind, value in links["on"].items()
                if value
            )
            lines.append(
                f"| {label} | {batch} x {length} | "
                + " / ".join(f"{temps[k] / MIB:,.0f}" for k in meshes)
                + " MiB ("
                + " / ".join(f"{temps[k] / temps['off']:.2f}" for k in meshes)
                + f") | {scores / MIB:,.0f} MiB | "
                f"{predicted['off'] / MIB:,.0f} / "
                f"{predicted['on'] / MIB:,.0f} MiB "
                f"({predicted['on'] / predicted['off']:.2f}) | "
                f"{total['off'] / 1e6:,.0f} / {total['on'] / 1e6:,.0f} "
                f"({total['on'] / total['off']:.2f}) | {kinds} |"
            )
            print(lines[-1], flush=True)
    lines += ["", NOTE]
    print("\n".join(lines))
    if args.output:
        with open(args.output, "w") as file:
            file.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
