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
import os
import re
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _sharded_configs import setup_devices

    setup_devices()

MESH = (1, 8)
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


def measure(class_name, config, batch, length, sequence_parallel):
    import _sharded_configs as shared

    cls = shared.our_class(class_name)
    mesh = shared.device_mesh(MESH)
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
    return analysis.temp_size_in_bytes, link_bytes(text, MESH[1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args()
    lines = [
        f"One training step on {MESH[0]}x{MESH[1]} fake CPU devices, per "
        "device: XLA's temporaries, the attention scores' share, and the "
        "collectives' link bytes (reduce-scatters as GPU/TPU XLA makes "
        "them).",
        "",
        "| model | batch x length | temporaries off / on (ratio) | "
        "one score tensor a block | the rest off / on (ratio) | "
        "link MB off / on (ratio) | collectives on |",
        "|---|---|---|---:|---|---|---|",
    ]
    for label, (class_name, config) in CONFIGS.items():
        for batch, length in SHAPES:
            temps, links = {}, {}
            for enabled in (False, True):
                temps[enabled], links[enabled] = measure(
                    class_name, config, batch, length, enabled
                )
            heads = config["num_query_heads"] // MESH[1]
            scores = config["num_layers"] * batch * heads * length**2 * 4
            # What sequence parallelism can split: the temporaries beyond
            # the scores, off; and the same part, on.
            rest = {k: v - scores for k, v in temps.items()}
            total = {k: sum(v.values()) for k, v in links.items()}
            kinds = ", ".join(
                f"{kind} {value / 1e6:.0f}"
                for kind, value in links[True].items()
                if value
            )
            lines.append(
                f"| {label} | {batch} x {length} | "
                f"{temps[False] / MIB:,.0f} / {temps[True] / MIB:,.0f} MiB "
                f"({temps[True] / temps[False]:.2f}) | "
                f"{scores / MIB:,.0f} MiB | "
                f"{rest[False] / MIB:,.0f} / {rest[True] / MIB:,.0f} MiB "
                f"({rest[True] / rest[False]:.2f}) | "
                f"{total[False] / 1e6:,.0f} / {total[True] / 1e6:,.0f} "
                f"({total[True] / total[False]:.2f}) | {kinds} |"
            )
            print(lines[-1], flush=True)
    lines += ["", NOTE]
    print("\n".join(lines))
    if args.output:
        with open(args.output, "w") as file:
            file.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
