"""Collectives of one decode step with a KV cache split by length, against
the same step with the cache whole on the model axis, and the combine's
minimum.

A Gemma-like decoder with one key/value head (which the model axis cannot
split), on (1, 8) fake CPU devices: one decode step (`CausalLM._decode` of
one token per row, with caches of `--length` positions) is compiled twice,
with the plan's caches split by length (what `generate` does) and with
them whole on the model axis (the plan before issue 35), and the
collectives of each compiled program are counted (`collectives.py`'s
`collective_stats`: one instruction one collective, result bytes per
device). Splitting the cache adds the flash-decoding combine: per layer,
each device's softmax maximum and sum for its positions, and its weighted
values, all-reduced over the model axis: at least `batch x heads x
(head_dim + 2)` float32 values per layer and token.

Run: python benchmarks/cache_split_collectives.py [--length 8192]
    [--output benchmarks/cache_split_collectives.md]
"""

import argparse
import dataclasses
import math
import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _sharded_configs import setup_devices

    setup_devices()

CONFIG = dict(
    vocabulary_size=2048,
    num_layers=2,
    num_query_heads=8,
    num_key_value_heads=1,
    hidden_dim=256,
    head_dim=32,
    intermediate_dim=1024,
)
BATCH = 8
MESH = (1, 8)


def step_collectives(length, split):
    """Collective stats of one compiled decode step."""
    import jax
    import keras
    import numpy as np
    from collectives import collective_stats

    import keras_nlp

    cls = keras_nlp.models.GemmaBackbone
    devices = keras.distribution.list_devices()[: math.prod(MESH)]
    mesh = keras.distribution.DeviceMesh(MESH, ("batch", "model"), devices)
    distribution = keras_nlp.distribution.ModelParallel(
        layout_map=cls.get_layout_map(mesh, config=CONFIG),
        batch_dim_name="batch",
    )
    with distribution.scope():
        backbone = cls(**CONFIG)
        if not split:
            plan = backbone.layout_plan
            backbone._layout_plan = dataclasses.replace(
                plan,
                kv_caches=tuple(
                    dataclasses.replace(c, length_axes=())
                    for c in plan.kv_caches
                ),
            )
        lm = keras_nlp.models.GemmaCausalLM(backbone)
        caches = lm.init_cache(BATCH, length)
        kinds = {str(c.sharding.spec) for c in caches}
        tokens = np.ones((BATCH, 1), "int32")
        mask = np.ones((BATCH, length), "int32")
        positions = np.full((BATCH, 1), 5, "int32")
        state = [v.value for v in lm.weights]

        def step(state, caches, tokens, mask, positions):
            # The weights as arguments: the compiled step reads them as
            # laid out, as generate's loop does.
            for variable, value in zip(lm.weights, state, strict=True):
                variable._value = value
            hidden, caches = lm._decode(tokens, caches, 5, mask, positions)
            return hidden, caches

        compiled = (
            jax.jit(step)
            .lower(state, caches, tokens, mask, positions)
            .compile()
        )
    return collective_stats(compiled.as_text()), kinds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=8192)
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args()
    os.environ.setdefault("KERAS_BACKEND", "jax")
    rows = {}
    for split in (False, True):
        stats, kinds = step_collectives(args.length, split)
        rows[split] = (stats, kinds)
    heads, head_dim = CONFIG["num_query_heads"], CONFIG["head_dim"]
    minimum = CONFIG["num_layers"] * BATCH * heads * (head_dim + 2) * 4
    lines = [
        f"Gemma-like decoder ({CONFIG}), batch {BATCH}, caches of "
        f"{args.length} positions, one decode step on {MESH}.",
        "",
        "| cache | spec | collectives | bytes per device |",
        "|---|---|---:|---:|",
    ]
    totals = {}
    for split, (stats, kinds) in rows.items():
        count = sum(c.count for c in stats.values())
        nbytes = sum(c.bytes for c in stats.values())
        totals[split] = nbytes
        lines.append(
            f"| {'split by length' if split else 'whole on model'} | "
            f"{', '.join(sorted(kinds))} | {count} | {nbytes:,} |"
        )
    extra = totals[True] - totals[False]
    lines += [
        "",
        f"Added by the split: {extra:,} bytes per device and token; the "
        f"combine's minimum: {minimum:,} ({extra / minimum:.2f}x).",
    ]
    print("\n".join(lines))
    if args.output:
        with open(args.output, "w") as file:
            file.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
