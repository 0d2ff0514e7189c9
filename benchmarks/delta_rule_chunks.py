"""Prefill time of the gated delta rule, token by token against by chunks.

Compiles `gated_delta_rule` (one step per token) and
`chunked_gated_delta_rule` (keras_nlp/layers/gated_delta_net.py) with
`jax.jit` for one prompt of each length (batch 1, 4 heads with 64-dim keys
and values, float32, random unit keys and queries, decays in (-0.5, 0)
a token, a non-zero starting state) and times the compiled programs
alternately, `--repeats` times each, after a warm-up call: compile time is
printed apart and left out of the ratio. Also prints the largest absolute
difference of the two outputs and final states. A second table times the
gradient of `sum(outputs) + sum(state)` with respect to every input (what
training runs), with the largest difference of the gradients.

Run: python benchmarks/delta_rule_chunks.py [--lengths 256 1024]
    [--chunk-sizes 32 64 128] [--repeats 7] [--output FILE]
(benchmarks/delta_rule_chunks.md records a run, with notes.)
"""

import argparse
import os
import platform
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402

from keras_nlp.layers.gated_delta_net import chunked_gated_delta_rule  # noqa: E402
from keras_nlp.layers.gated_delta_net import gated_delta_rule  # noqa: E402

BATCH, HEADS, KEY_DIM, VALUE_DIM = 1, 4, 64, 64


def inputs(length, seed=0):
    """`(query, key, value, decay, beta, state)` as the layer makes them."""
    rng = np.random.default_rng(seed)

    def unit(shape):
        x = rng.normal(size=shape)
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    shape = (BATCH, length, HEADS, KEY_DIM)
    arrays = (
        unit(shape) * KEY_DIM**-0.5,
        unit(shape),
        rng.normal(size=(BATCH, length, HEADS, VALUE_DIM)),
        rng.uniform(-0.5, 0.0, size=(BATCH, length, HEADS)),
        rng.uniform(size=(BATCH, length, HEADS)),
        rng.normal(size=(BATCH, HEADS, KEY_DIM, VALUE_DIM)) * 0.1,
    )
    return [jax.numpy.asarray(x, "float32") for x in arrays]


def compile_seconds(function, arrays):
    """The compiled program and the seconds compiling it took."""
    start = time.perf_counter()
    compiled = jax.jit(function).lower(*arrays).compile()
    return compiled, time.perf_counter() - start


def run_seconds(compiled, arrays):
    start = time.perf_counter()
    jax.block_until_ready(compiled(*arrays))
    return time.perf_counter() - start


def gradient(function):
    """The gradients of `sum(outputs) + sum(state)` for every input."""

    def loss(*arrays):
        outputs, state = function(*arrays)
        return outputs.sum() + state.sum()

    return jax.grad(loss, argnums=tuple(range(6)))


def measure(length, chunk_sizes, repeats, train):
    """Rows of `(chunk size, compile s, median s, all s)` for one length,
    and each program's results; chunk size None is the token loop."""
    arrays = inputs(length)
    functions = {None: gated_delta_rule}
    for size in chunk_sizes:
        functions[size] = lambda *a, size=size: chunked_gated_delta_rule(
            *a, chunk_size=size
        )
    if train:
        functions = {size: gradient(f) for size, f in functions.items()}
    compiled, compile_times, results = {}, {}, {}
    for size, function in functions.items():
        compiled[size], compile_times[size] = compile_seconds(function, arrays)
        results[size] = jax.block_until_ready(compiled[size](*arrays))
    times = {size: [] for size in functions}
    # Alternate the programs so that a busy moment of the machine slows
    # them all alike.
    for _ in range(repeats):
        for size in functions:
            times[size].append(run_seconds(compiled[size], arrays))
    return [
        (size, compile_times[size], float(np.median(times[size])), times[size])
        for size in functions
    ], results


def table(args, train):
    lines = [
        "| tokens | rule | compile s | median ms | runs ms | token loop / "
        f"this | max abs diff {'gradients' if train else 'outputs, state'} |",
        "|---:|---|---:|---:|---|---:|---|",
    ]
    for length in args.lengths:
        rows, results = measure(length, args.chunk_sizes, args.repeats, train)
        token_median = rows[0][2]
        expected = [np.asarray(x) for x in results[None]]
        for size, compile_s, median, times in rows:
            name = "token by token" if size is None else f"chunks of {size}"
            if size is None:
                difference = "-"
            else:
                got = [np.asarray(x) for x in results[size]]
                differences = [
                    np.abs(a - b).max()
                    for a, b in zip(got, expected, strict=True)
                ]
                difference = ", ".join(f"{d:.1e}" for d in differences)
                if train:
                    largest = max(np.abs(b).max() for b in expected)
                    difference = (
                        f"{max(differences):.1e} (largest gradient "
                        f"{largest:.1e})"
                    )
            runs = " ".join(f"{t * 1e3:.1f}" for t in times)
            lines.append(
                f"| {length} | {name} | {compile_s:.2f} | "
                f"{median * 1e3:.2f} | {runs} | {token_median / median:.2f}x "
                f"| {difference} |"
            )
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024])
    parser.add_argument(
        "--chunk-sizes", type=int, nargs="+", default=[32, 64, 128]
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args()
    lines = [
        f"batch {BATCH}, {HEADS} heads, key and value dims {KEY_DIM} and "
        f"{VALUE_DIM}, float32; jax {jax.__version__} on "
        f"{jax.default_backend()} ({os.cpu_count()} cores, "
        f"{platform.machine()}); median of {args.repeats} runs of each "
        "compiled program, taken in turn, after a warm-up call",
        "",
        "Prefill (outputs and final state):",
        "",
        *table(args, train=False),
        "",
        "Training (gradients of sum(outputs) + sum(state) for every input):",
        "",
        *table(args, train=True),
    ]
    text = "\n".join(lines)
    print(text)
    if args.output:
        with open(args.output, "w") as file:
            file.write(text + "\n")


if __name__ == "__main__":
    main()
