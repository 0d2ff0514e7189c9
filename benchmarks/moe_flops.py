"""FLOPs of a mixture-of-experts block: sparse (grouped matmul) vs dense.

Compiles a `SparseMoE` forward pass on one CPU device for several
`(num_experts, top_k)` and reads the FLOPs XLA counts in the compiled
program (`cost_analysis`). Sparse compute should cost `top_k` expert
feed-forwards per token whatever `num_experts` is; dense compute costs
`num_experts`. Also prints measured FLOPs over the analytic count of the
active parameters: `tokens * (2 * hidden * experts` (router)
`+ top_k * 3 * 2 * hidden * width)` (gate, intermediate, output).

On CPU, XLA lowers `ragged_dot` to a dense dot per group, so the sparse
column there measures that lowering (`num_experts` times the active FLOPs),
not the grouped matmul GPUs and TPUs run: read it on an accelerator.

Run: python benchmarks/moe_flops.py [--output moe_flops.md]
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402

from keras_nlp.layers.sparse_moe import SparseMoE  # noqa: E402

# Mixtral's block shapes scaled down 8x in width, 512 tokens.
HIDDEN, WIDTH, TOKENS = 512, 1792, 512


def compiled_flops(num_experts, top_k, compute):
    block = SparseMoE(
        num_experts=num_experts,
        intermediate_dim=WIDTH,
        top_k=top_k,
        compute=compute,
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
    return analysis["flops"]


def analytic_flops(num_experts, top_k):
    router = 2 * HIDDEN * num_experts
    experts = top_k * 3 * 2 * HIDDEN * WIDTH
    return TOKENS * (router + experts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", help="also write the table here")
    args = parser.parse_args()
    cases = [(2, 2), (8, 2), (8, 8), (128, 8)]
    flops = {
        (e, k, compute): compiled_flops(e, k, compute)
        for e, k in cases
        for compute in ("sparse", "dense")
    }
    lines = [
        f"hidden {HIDDEN}, expert width {WIDTH}, {TOKENS} tokens, "
        f"jax {jax.__version__}, {jax.default_backend()}",
        "",
        "| experts, top_k | sparse GFLOPs | dense GFLOPs | "
        "sparse / analytic active | dense / analytic active |",
        "|---|---:|---:|---:|---:|",
    ]
    for e, k in cases:
        analytic = analytic_flops(e, k)
        sparse, dense = flops[(e, k, "sparse")], flops[(e, k, "dense")]
        lines.append(
            f"| {e}, {k} | {sparse / 1e9:.3f} | {dense / 1e9:.3f} | "
            f"{sparse / analytic:.3f} | {dense / analytic:.3f} |"
        )
    lines += [
        "",
        "| ratio | sparse | dense |",
        "|---|---:|---:|",
    ]
    for (e1, k1), (e2, k2) in [((8, 2), (2, 2)), ((128, 8), (8, 8))]:
        lines.append(
            f"| FLOPs({e1} experts, top {k1}) / FLOPs({e2}, top {k2}) | "
            f"{flops[(e1, k1, 'sparse')] / flops[(e2, k2, 'sparse')]:.3f} | "
            f"{flops[(e1, k1, 'dense')] / flops[(e2, k2, 'dense')]:.3f} |"
        )
    table = "\n".join(lines)
    print(table)
    if args.output:
        with open(args.output, "w") as file:
            file.write(table + "\n")


if __name__ == "__main__":
    main()
