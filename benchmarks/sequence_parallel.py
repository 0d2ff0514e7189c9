"""A training step at 8k tokens before and after issue 35, side by side.

A Llama-like (32 query : 8 key/value heads) and a Gemma-like (8 : 1)
decoder, two blocks each, on 8 fake CPU devices: one training step
(`_sharded_configs.Step`: next-token loss and every gradient) at 8,192
tokens, as 1 x 8,192 and 8 x 1,024, compiled four ways: `before` (1x8,
the all-reduce pattern, scores materialized: `query_chunk_scope(None)`),
`chunks` (1x8, attention in chunks of queries), `SP` (1x8, chunks and
sequence parallelism) and `CP` (1x2x4 batch, context, model: chunks,
sequence parallelism and context parallelism). Printed per device:

- temporaries: XLA's `memory_analysis().temp_size_in_bytes` of the
  compiled step (the activations held for the backward pass and the
  transient buffers; weights and gradients are arguments and outputs);
- the memory model's activations (`estimate_memory`: `activations` and
  `attention_chunk`) for the same plans;
- link bytes of the collectives, counted from the compiled HLO: ring
  algorithms over the 8 devices, an all-reduce `2 (m - 1) / m` of its
  bytes, an all-gather, reduce-scatter or all-to-all `(m - 1) / m` of the
  whole array. XLA's CPU backend has no reduce-scatter: it all-reduces and
  each device keeps its slice (a `dynamic-slice` by `partition-id`, fused
  with what follows), which GPU and TPU XLA rewrite into a reduce-scatter.
  An all-reduced array whose every reader keeps a `1 / 8` slice indexed by
  the partition id is counted as the reduce-scatter it becomes there
  (`before` and `SP` only: one axis of 8).

Nothing here is timed. Run:
    python benchmarks/sequence_parallel.py
        [--output benchmarks/sequence_parallel.md]
"""

import argparse
import contextlib
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
At 8,192 tokens in one sequence the attention scores outweigh every other
activation: XLA's CPU attention keeps `batch x heads / 8 x length^2`
floats per block for the backward pass. Attending in chunks of 1,024
queries, each recomputed in the backward pass, keeps one chunk's scores
at a time (`chunks`); sequence parallelism then splits the residual-width
activations that every model-axis device held whole (`SP`): 0.12 and 0.24
of before. At 8 x 1,024 no chunk applies (a sequence of one chunk) and
sequence parallelism alone gives 0.61 and 0.47. The link bytes stay the
all-reduce pattern's (0.98): each all-reduce becomes a reduce-scatter and
an all-gather. With a context axis (`CP`, 1x2x4) each chunk takes every
`count`-th query, so it spans the whole sequence and splits over the
context axis as the sequence does: 0.13 and 0.23 of before."""
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


def measure(
    class_name, config, batch, length, sequence_parallel, mesh_axes, chunk
):
    """`(temporaries, link bytes by kind or None, predicted activations)`
    of one training step; link bytes on one model axis only. `chunk`:
    `"default"`, or `None` to attend without query chunks."""
    import _sharded_configs as shared
    import keras

    from keras_nlp.distribution.activations import query_chunk_scope
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
        scope = contextlib.nullcontext()
        if chunk is None:
            scope = query_chunk_scope(None)
        with scope:
            compiled = step.train.lower(*step.args).compile()
        return compiled.memory_analysis(), compiled.as_text()

    analysis, text = step._traced(compile_step)
    links = link_bytes(text, shape[-1]) if len(shape) == 2 else None
    scope = contextlib.nullcontext()
    if chunk is None:
        scope = query_chunk_scope(None)
    with scope:
        categories = estimate_memory(
            layout_map.plan, Workload("train", batch, length)
        ).categories
    predicted = categories["activations"] + categories.get("attention_chunk", 0)
    return analysis.temp_size_in_bytes, links, predicted


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args()
    lines = [
        "One training step on 8 fake CPU devices, per device: XLA's "
        "temporaries (activations and transient buffers), the memory "
        "model's activations, and the collectives' link bytes "
        "(reduce-scatters as GPU/TPU XLA makes them). Before: the "
        "all-reduce pattern on 1x8, scores materialized (as before issue "
        "35); chunks: queries attended in chunks of 1,024; SP: sequence "
        "parallelism and chunks on 1x8; CP: a (batch, context, model) mesh "
        "of 1x2x4 with both.",
        "",
        "| model | batch x length | temporaries before / chunks / SP / CP "
        "(ratio to before) | predicted activations, the same | "
        "link MB before / SP (ratio) | collectives SP |",
        "|---|---|---|---|---|---|",
    ]
    one_axis = ((1, 8), ("batch", "model"))
    runs = {
        "before": (one_axis, False, None),
        "chunks": (one_axis, False, "default"),
        "SP": (one_axis, True, "default"),
        "CP": (((1, 2, 4), ("batch", "context", "model")), True, "default"),
    }
    for label, (class_name, config) in CONFIGS.items():
        for batch, length in SHAPES:
            temps, links, predicted = {}, {}, {}
            for name, (mesh_axes, enabled, chunk) in runs.items():
                temps[name], links[name], predicted[name] = measure(
                    class_name,
                    config,
                    batch,
                    length,
                    enabled,
                    mesh_axes,
                    chunk,
                )
            total = {k: sum(links[k].values()) for k in ("before", "SP")}
            kinds = ", ".join(
                f"{kind} {value / 1e6:.0f}"
                for kind, value in links["SP"].items()
                if value
            )
            lines.append(
                f"| {label} | {batch} x {length} | "
                + " / ".join(f"{temps[k] / MIB:,.0f}" for k in runs)
                + " MiB ("
                + " / ".join(f"{temps[k] / temps['before']:.2f}" for k in runs)
                + ") | "
                + " / ".join(f"{predicted[k] / MIB:,.0f}" for k in runs)
                + " MiB ("
                + " / ".join(
                    f"{predicted[k] / predicted['before']:.2f}" for k in runs
                )
                + ") | "
                f"{total['before'] / 1e6:,.0f} / {total['SP'] / 1e6:,.0f} "
                f"({total['SP'] / total['before']:.2f}) | {kinds} |"
            )
            print(lines[-1], flush=True)
    lines += ["", NOTE]
    print("\n".join(lines))
    if args.output:
        with open(args.output, "w") as file:
            file.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
