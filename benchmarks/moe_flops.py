"""FLOPs and time of a mixture-of-experts block, per way of computing it.

Compiles a `SparseMoE` forward pass on one device for several
`(num_experts, top_k)` and reads the FLOPs XLA counts in the compiled
program (`cost_analysis`), and times it, for each compute:

- dense: every expert on every token, unselected ones weighted 0
  (`num_experts` expert feed-forwards per token);
- sparse: each expert on its own tokens through `jax.lax.ragged_dot`,
  dropless;
- capacity c: each expert on at most `ceil(c * tokens * top_k / experts)`
  slots (static shapes, `keras_nlp/layers/expert_dispatch.py`), about
  `c * top_k` expert feed-forwards per token.

Measured FLOPs are also divided by the analytic count of the active
parameters: `tokens * (2 * hidden * experts` (router)
`+ top_k * 3 * 2 * hidden * width)` (gate, intermediate, output).

On CPU, XLA lowers `ragged_dot` to a dense dot per group, so the sparse
column there measures that lowering (`num_experts` times the active FLOPs),
not the grouped matmul GPUs and TPUs run: read it on an accelerator. The
capacity columns count what any backend runs.

Run: python benchmarks/moe_flops.py [--output moe_flops.md]
"""

import argparse
import os
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402

from keras_nlp.layers.sparse_moe import SparseMoE  # noqa: E402

# Mixtral's block shapes scaled down 8x in width, 512 tokens.
HIDDEN, WIDTH, TOKENS = 512, 1792, 512
CASES = [(2, 2), (8, 2), (8, 8), (128, 8)]
# What the issue compares: more experts at the same top_k.
RATIOS = [((8, 2), (2, 2)), ((128, 8), (8, 8))]
COMPUTES = {
    "dense": dict(compute="dense"),
    "sparse": dict(compute="sparse"),
    "capacity 1.0": dict(capacity_factor=1.0),
    "capacity 1.25": dict(capacity_factor=1.25),
}
REPEATS = 5


def measure(num_experts, top_k, options):
    """`(FLOPs, median seconds)` of one compiled forward pass."""
    block = SparseMoE(
        num_experts=num_experts, intermediate_dim=WIDTH, top_k=top_k, **options
    )
    block.build((None, None, HIDDEN))
    weights = [v.value for v in block.trainable_variables]
    x = np.random.default_rng(0).normal(size=(1, TOKENS, HIDDEN))
    x = x.astype("float32")

    def forward(weights, x):
        return block.stateless_call(weights, [], x)[0]

    compiled = jax.jit(forward).lower(weights, x).compile()
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list):
        analysis = analysis[0]
    compiled(weights, x).block_until_ready()
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        compiled(weights, x).block_until_ready()
        times.append(time.perf_counter() - start)
    return analysis["flops"], float(np.median(times))


def analytic_flops(num_experts, top_k):
    router = 2 * HIDDEN * num_experts
    experts = top_k * 3 * 2 * HIDDEN * WIDTH
    return TOKENS * (router + experts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", help="also write the tables here")
    args = parser.parse_args()
    results = {
        (e, k, name): measure(e, k, options)
        for e, k in CASES
        for name, options in COMPUTES.items()
    }
    names = list(COMPUTES)
    lines = [
        f"hidden {HIDDEN}, expert width {WIDTH}, {TOKENS} tokens, "
        f"jax {jax.__version__}, {jax.default_backend()}; time: median of "
        f"{REPEATS} compiled forward passes",
        "",
        "Measured FLOPs / analytic active FLOPs (and ms per forward pass):",
        "",
        "| experts, top_k | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for e, k in CASES:
        analytic = analytic_flops(e, k)
        cells = [
            f"{results[(e, k, n)][0] / analytic:.3f} "
            f"({results[(e, k, n)][1] * 1e3:.1f} ms)"
            for n in names
        ]
        lines.append(f"| {e}, {k} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "FLOPs with more experts at the same top_k (goal: <= 1.2):",
        "",
        "| ratio | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for (e1, k1), (e2, k2) in RATIOS:
        cells = [
            f"{results[(e1, k1, n)][0] / results[(e2, k2, n)][0]:.3f}"
            for n in names
        ]
        lines.append(
            f"| FLOPs({e1} experts, top {k1}) / FLOPs({e2}, top {k2}) | "
            + " | ".join(cells)
            + " |"
        )
    table = "\n".join(lines)
    print(table)
    if args.output:
        with open(args.output, "w") as file:
            file.write(table + "\n")


if __name__ == "__main__":
    main()
