"""Decode speed with int8 weights against bfloat16, sharded and on one
device, in one run.

A Llama-style decoder with the same random weights four ways: float
(bfloat16, or `--dtype float32`) and int8 (`quantize("int8")`: int8
kernels and embeddings, scales in the float dtype), each on one device
and on a (1, 8) mesh. The int8 model is
quantized once, unsharded, and its quantized weights are loaded into a
build of `quantized_config` under the mesh's `ModelParallel` scope (the
quantize-then-shard order a quantized preset takes). Each generates a
batch of prompts greedily; calls are interleaved, medians over repeats
after a warm-up call per shape; one decode step is the difference between
`generate` with N new tokens and with 1, over N - 1 (as in
`generate_decode.py`). Reported: decode tokens/s, int8 / bfloat16, the
weights' bytes per device from each plan, and the share of int8 tokens
the sharded run has in common with the single device's.

Run: python benchmarks/quantized_decode.py [--size small|1b] [--meshes 1 1x8]
    [--repeats 5] [--new-tokens 32] [--output benchmarks/quantized_decode.md]

On one GPU: `--size 1b --meshes 1` (bfloat16 against int8 on one device).
"""

import argparse
import math
import os
import statistics
import sys
import time

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if "--meshes" not in sys.argv or "1x8" in sys.argv:
        # Fake devices must be requested before JAX is imported.
        from _sharded_configs import setup_devices

        setup_devices()

SIZES = {
    # Compiles in seconds on CPU; 8 key/value heads divide the model axis.
    "small": dict(
        vocabulary_size=4096,
        num_layers=4,
        num_query_heads=16,
        num_key_value_heads=8,
        hidden_dim=256,
        intermediate_dim=768,
    ),
    # Llama 3.2 1B's shapes (16 layers, hidden 2048, 32:8 heads): decode
    # reads all weights every step, where int8 halves the bytes.
    "1b": dict(
        vocabulary_size=128256,
        num_layers=16,
        num_query_heads=32,
        num_key_value_heads=8,
        hidden_dim=2048,
        intermediate_dim=8192,
    ),
}
BATCH = 8
PROMPT = 32
AXES = ("batch", "model")


def build_generators(config, meshes, dtype):
    """`{name: (Generator, plan)}` for bfloat16 and int8 on each mesh."""
    import keras
    from generate_decode import Generator

    import keras_nlp
    from keras_nlp.distribution import quantized_config

    cls = keras_nlp.models.LlamaBackbone
    config = {**config, "dtype": dtype}
    keras.utils.set_random_seed(0)
    float_model = cls(**config)
    int8_model = cls(**config)
    int8_model.set_weights(float_model.get_weights())
    int8_model.quantize("int8")
    int8_config = quantized_config(cls, config, "int8")
    sources = {
        "float": (config, float_model),
        "int8": (int8_config, int8_model),
    }
    generators = {}
    for mesh_name in meshes:
        for dtype, (dtype_config, model) in sources.items():
            name = f"{dtype}, {mesh_name}"
            if mesh_name == "1":
                lm = keras_nlp.models.LlamaCausalLM(model)
                generators[name] = (Generator(lm), None)
                continue
            shape = tuple(int(d) for d in mesh_name.split("x"))
            devices = keras.distribution.list_devices()[: math.prod(shape)]
            mesh = keras.distribution.DeviceMesh(shape, AXES, devices)
            layout_map = cls.get_layout_map(mesh, config=dtype_config)
            distribution = keras_nlp.distribution.ModelParallel(
                layout_map=layout_map, batch_dim_name="batch"
            )
            with distribution.scope():
                sharded = cls.from_config(dtype_config)
                values = {v.path: v for v in model.weights}
                for variable in sharded.weights:
                    variable.assign(values[variable.path].numpy())
                lm = keras_nlp.models.LlamaCausalLM(sharded)
            generators[name] = (
                Generator(lm, distribution),
                sharded.layout_plan,
            )
    return generators


def measure(generators, new_tokens, repeats, vocabulary_size):
    import numpy as np
    from generate_decode import decode_rates

    rng = np.random.default_rng(0)
    prompts = rng.integers(1, vocabulary_size, (BATCH, PROMPT)).astype("int32")
    times = {(name, n): [] for name in generators for n in (1, new_tokens)}
    tokens = {}
    for count in (1, new_tokens):
        for generator, _ in generators.values():
            generator.generate(prompts, count)  # compiles the loop
        for _ in range(repeats):
            for name, (generator, _) in generators.items():
                seconds, ids, _, _ = generator.generate(prompts, count)
                times[name, count].append(seconds)
                tokens[name] = np.asarray(ids)[:, PROMPT : PROMPT + count]
    rates = {
        name: decode_rates(
            statistics.median(times[name, 1]),
            statistics.median(times[name, new_tokens]),
            new_tokens,
            BATCH,
        )
        for name in generators
    }
    return rates, tokens


def render(generators, rates, tokens, args):
    lines = [
        f"| | decode tokens/s | step (ms) | int8 / {args.dtype} tokens/s | "
        "weights per device (MiB) | int8 tokens equal to 1 device's |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, (generator, plan) in generators.items():
        dtype, _, mesh = name.partition(", ")
        rate = rates[name]["decode_tokens_per_s"]
        ratio = equal = "-"
        if dtype == "int8":
            float_rate = rates[f"float, {mesh}"]["decode_tokens_per_s"]
            ratio = f"{rate / float_rate:.2f}"
            reference = tokens.get("int8, 1")
            if reference is not None and mesh != "1":
                equal = f"{(tokens[name] == reference).mean():.1%}"
        weights = (
            sum(v.numpy().nbytes for v in generator.causal_lm.backbone.weights)
            if plan is None
            else plan.bytes_per_device
        )
        lines.append(
            f"| {name} | {rate:.1f} | {rates[name]['step_ms']:.2f} | "
            f"{ratio} | {weights / 2**20:.1f} | {equal} |"
        )
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--meshes", nargs="+", default=["1", "1x8"])
    parser.add_argument("--dtype", default="bfloat16", help="float dtype")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args()
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import jax

    start = time.perf_counter()
    config = SIZES[args.size]
    generators = build_generators(config, args.meshes, args.dtype)
    rates, tokens = measure(
        generators, args.new_tokens, args.repeats, config["vocabulary_size"]
    )
    device = jax.devices()[0]
    lines = [
        f"Llama-style decoder `{args.size}` ({config}), {args.dtype} "
        f"weights ('float') against int8, batch {BATCH}, prompts of {PROMPT}, "
        f"{args.new_tokens} new tokens, medians of {args.repeats}, on "
        f"{device.platform} ({device.device_kind}).",
        "",
    ]
    lines += render(generators, rates, tokens, args)
    lines += ["", f"Measured in {time.perf_counter() - start:.0f} s."]
    table = "\n".join(lines)
    print(table)
    if args.output:
        with open(args.output, "w") as file:
            file.write(table + "\n")


if __name__ == "__main__":
    main()
