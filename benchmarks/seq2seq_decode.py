"""Seq2seq generation speed: one device vs sharded (1, 8), in one run.

The encoder-decoder counterpart of `generate_decode.py` part 1. One BART
model, the same weights twice: on one device with no distribution, and on
a (1, 8) mesh of fake CPU devices under `ModelParallel` with the
backbone's `get_layout_map` (8 heads: both caches of every decoder block
sharded by heads). Both `BartSeq2SeqLM.generate` a batch greedily from a
one-token decoder prompt, calls interleaved, medians after a warm-up
call per shape (which compiles the loop).

Prefill is timed as `generate` filling 1 new slot (encoder, the
cross-attention caches, the decoder's first pass); one decode step as the
difference to `generate` filling N new slots, over N - 1.

Run: python benchmarks/seq2seq_decode.py [--repeats 3] [--new-tokens 16]
"""

import argparse
import contextlib
import math
import statistics
import time

if __name__ == "__main__":
    # Fake devices must be requested before JAX is imported.
    from _sharded_configs import setup_devices

    setup_devices()

MODEL = dict(
    vocabulary_size=4096,
    num_layers=2,
    num_heads=8,
    hidden_dim=256,
    intermediate_dim=768,
    max_sequence_length=128,
    dropout=0.0,
)
BATCH = 8
SOURCE = 64
MESH = (1, 8)
AXES = ("batch", "model")


def build():
    """`{name: (lm, distribution or None)}`, the same weights on both."""
    import keras

    import keras_nlp

    keras.utils.set_random_seed(0)
    single = keras_nlp.models.BartBackbone(**MODEL)
    devices = keras.distribution.list_devices()[: math.prod(MESH)]
    mesh = keras.distribution.DeviceMesh(MESH, AXES, devices)
    distribution = keras.distribution.ModelParallel(
        layout_map=keras_nlp.models.BartBackbone.get_layout_map(mesh),
        batch_dim_name="batch",
    )
    with distribution.scope():
        sharded = keras_nlp.models.BartBackbone(**MODEL)
        for target, source in zip(sharded.weights, single.weights, strict=True):
            target.assign(source.numpy())
        sharded_lm = keras_nlp.models.BartSeq2SeqLM(sharded)
    return {
        "1 device": (keras_nlp.models.BartSeq2SeqLM(single), None),
        "x".join(map(str, MESH)): (sharded_lm, distribution),
    }


def inputs_for(new_tokens):
    import numpy as np

    rng = np.random.default_rng(0)
    width = 1 + new_tokens
    decoder = np.zeros((BATCH, width), "int32")
    decoder[:, 0] = 2
    mask = np.zeros((BATCH, width), "int32")
    mask[:, 0] = 1
    return {
        "encoder_token_ids": rng.integers(
            1, MODEL["vocabulary_size"], (BATCH, SOURCE)
        ).astype("int32"),
        "encoder_padding_mask": np.ones((BATCH, SOURCE), "int32"),
        "decoder_token_ids": decoder,
        "decoder_padding_mask": mask,
    }


def timed(lm, distribution, inputs):
    scope = distribution.scope() if distribution else contextlib.nullcontext()
    with scope:
        start = time.perf_counter()
        outputs = lm.generate(inputs, stop_token_ids=None)
        return time.perf_counter() - start, outputs["decoder_token_ids"]


def main(repeats, new_tokens):
    import numpy as np

    models = build()
    medians, tokens, warmups = {}, {}, {}
    for count in (1, new_tokens):
        inputs = inputs_for(count)
        for name, (lm, distribution) in models.items():
            warmups[name, count] = timed(lm, distribution, inputs)[0]
        times = {name: [] for name in models}
        for _ in range(repeats):
            for name, (lm, distribution) in models.items():
                seconds, tokens[name, count] = timed(lm, distribution, inputs)
                times[name].append(seconds)
        for name in models:
            medians[name, count] = statistics.median(times[name])
    names = list(models)
    print(
        f"BART {MODEL['num_layers']}+{MODEL['num_layers']} layers, hidden "
        f"{MODEL['hidden_dim']}, {MODEL['num_heads']} heads, vocabulary "
        f"{MODEL['vocabulary_size']}, float32; batch {BATCH}, source "
        f"{SOURCE} tokens, greedy, medians of {repeats} calls.\n"
    )
    print("| | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    rows = {}
    for name in names:
        prefill = medians[name, 1]
        step = (medians[name, new_tokens] - prefill) / (new_tokens - 1)
        rows[name] = {
            "prefill (encoder + caches + 1 slot) ms": prefill * 1e3,
            f"generate, {new_tokens} new slots ms": (
                medians[name, new_tokens] * 1e3
            ),
            "decode step ms": step * 1e3,
            "decode tokens/s": BATCH / step if step > 0 else float("nan"),
            "end-to-end tokens/s": (
                BATCH * new_tokens / medians[name, new_tokens]
            ),
            "first call, compiling (s)": warmups[name, new_tokens],
            "loop traces": models[name][0].generate_traces,
        }
    for label in rows[names[0]]:
        cells = " | ".join(f"{rows[name][label]:.4g}" for name in names)
        print(f"| {label} | {cells} |")
    equal = np.mean(
        tokens[names[0], new_tokens] == tokens[names[1], new_tokens]
    )
    print(f"\nsharded tokens equal to one device's: {100 * equal:.1f}%")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=16)
    args = parser.parse_args()
    main(args.repeats, args.new_tokens)
