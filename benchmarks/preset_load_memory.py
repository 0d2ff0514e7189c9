"""Peak host memory of saving and loading a ~1 GB preset, (1, 8) and unsharded.

Builds a Llama-shaped backbone of about 1 GB (float32, heads that divide 8,
so the plan shards everything) and measures, each in a fresh process on 8
fake CPU devices (where device memory is host memory):

- `save_to_preset` from a backbone sharded on a (1, 8) mesh and from an
  unsharded one: peak RSS over the RSS just before the save (the model is
  already there), against the goal of 1.1 x the largest tensor, and the RSS
  left after it returns (goal: back to the model's size, growth ~0). Keras's
  `save_weights` of the same sharded backbone is the reference.
- `Backbone.from_preset` into a (1, 8) mesh and unsharded: peak RSS over the
  RSS before loading, against 1.1 x (model + largest tensor). Keras's
  `load_weights` into the sharded backbone, which reads each tensor whole
  before placing it, is the reference.
- The same backbone saved as a Hugging Face checkpoint
  (`save_to_preset(..., format="huggingface")`, safetensors) and loaded by
  `Backbone.from_preset` into a (1, 8) mesh, against the same goal, with
  keras-hub's `Backbone.from_preset` of that directory (unsharded: it builds
  its model with random weights, then copies each tensor in) as the
  reference.

Peaks are the kernel's high-water mark (VmHWM), reset just before the
measured call, so they cover exactly that call. Every row is measured in
the same run, side by side. Before a save the backbone's config is
serialized once: Keras's serializer imports TensorFlow (when installed) the
first time, a one-time ~0.4 GiB of code that does not depend on the model.

Run: python benchmarks/preset_load_memory.py [--layers 3] [--keep DIR]
"""

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

CONFIG = dict(
    vocabulary_size=32000,
    hidden_dim=2048,
    intermediate_dim=5632,
    num_query_heads=16,
    num_key_value_heads=8,
    tie_word_embeddings=False,
)
GIB = 1024**3


def _setup():
    os.environ.setdefault("KERAS_BACKEND", "jax")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"


def _status(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak():
    # Linux: writing 5 resets VmHWM to the current RSS.
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def _distribution(sharded):
    import keras

    from keras_nlp.models import Backbone

    if not sharded:
        return None
    devices = keras.distribution.list_devices()
    mesh = keras.distribution.DeviceMesh((1, 8), ("batch", "model"), devices)
    return keras.distribution.ModelParallel(
        layout_map=Backbone.get_layout_map(mesh), batch_dim_name="batch"
    )


def _build(layers, sharded):
    import jax

    from keras_nlp.models import Llama3Backbone

    distribution = _distribution(sharded)
    if distribution is None:
        backbone = Llama3Backbone(num_layers=layers, **CONFIG)
    else:
        with distribution.scope():
            backbone = Llama3Backbone(num_layers=layers, **CONFIG)
    # Initializers run asynchronously: wait, or the RSS "before" the save
    # would miss part of the model.
    jax.block_until_ready([v.value for v in backbone.weights])
    return backbone


def _sizes(backbone):
    sizes = [int(v.value.nbytes) for v in backbone.weights]
    return {"bytes": sum(sizes), "largest_bytes": max(sizes)}


def save(path, layers, method, sharded):
    """Runs in a fresh process: builds, then saves `path`; reports RSS."""
    _setup()
    backbone = _build(layers, sharded)
    # Keras's serializer imports TensorFlow (when installed) the first time
    # a config is serialized: a one-time ~0.4 GiB, whatever the model.
    backbone.get_config()
    gc.collect()
    before = _status("VmRSS")
    _reset_peak()
    start = time.perf_counter()
    if method == "keras_nlp":
        backbone.save_to_preset(path)
    elif method == "huggingface":
        backbone.save_to_preset(path, format="huggingface")
    else:
        os.makedirs(path, exist_ok=True)
        backbone.save_weights(os.path.join(path, "model.weights.h5"))
    seconds = time.perf_counter() - start
    peak = _status("VmHWM")
    gc.collect()
    return {
        "rss_before": before,
        "peak_rss": peak,
        "rss_after": _status("VmRSS"),
        "seconds": seconds,
        **_sizes(backbone),
    }


def load(path, method, sharded):
    """Runs in a fresh process: loads `path`; reports RSS."""
    _setup()
    import jax

    from keras_nlp.models import Backbone

    distribution = _distribution(sharded)
    scope = distribution.scope() if distribution else _nothing()
    gc.collect()
    before = _status("VmRSS")
    _reset_peak()
    start = time.perf_counter()
    if method == "keras_hub":
        import keras_hub

        scope = _nothing()
        gc.collect()
        before = _status("VmRSS")
        _reset_peak()
        start = time.perf_counter()
    with scope:
        if method in ("keras_nlp", "huggingface"):
            backbone = Backbone.from_preset(path)
        elif method == "keras_hub":
            backbone = keras_hub.models.Backbone.from_preset(path)
        else:
            backbone = Backbone.from_preset(path, load_weights=False)
            backbone.load_weights(os.path.join(path, "model.weights.h5"))
    jax.block_until_ready([v.value for v in backbone.weights])
    seconds = time.perf_counter() - start
    peak = _status("VmHWM")
    gc.collect()
    return {
        "rss_before": before,
        "peak_rss": peak,
        "rss_after": _status("VmRSS"),
        "seconds": seconds,
        **_sizes(backbone),
    }


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False


def _child(function, *args):
    command = [
        sys.executable,
        __file__,
        "--child",
        json.dumps([function, *args]),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{function} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _row(name, measured, model, largest, goal):
    growth = measured["peak_rss"] - measured["rss_before"]
    left = measured["rss_after"] - measured["rss_before"]
    print(
        f"| {name} | {growth / GIB:.3f} | {growth / largest:.2f} | "
        f"{growth / model:.3f} | {growth / goal:.3f} | {left / GIB:.3f} | "
        f"{left / model:.3f} | {measured['seconds']:.1f} |"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--keep", help="write the preset here and keep it")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        function, *rest = json.loads(args.child)
        print(json.dumps(globals()[function](*rest)))
        return

    directory = args.keep or tempfile.mkdtemp(prefix="preset_memory_")
    preset = os.path.join(directory, "preset")
    scratch = os.path.join(directory, "scratch")
    saves = {}
    for label, method, sharded, path in [
        ("`save_to_preset`, unsharded", "keras_nlp", False, scratch),
        ("Keras `save_weights`, (1, 8)", "keras", True, scratch),
        # Last, so the kept preset is the sharded save's.
        ("`save_to_preset`, (1, 8)", "keras_nlp", True, preset),
    ]:
        shutil.rmtree(scratch, ignore_errors=True)
        saves[label] = _child("save", path, args.layers, method, sharded)
    shutil.rmtree(scratch, ignore_errors=True)
    sizes = next(iter(saves.values()))
    model, largest = sizes["bytes"], sizes["largest_bytes"]
    print(
        f"preset: {model / GIB:.3f} GiB ({args.layers} Llama-shaped layers), "
        f"largest tensor {largest / GIB:.3f} GiB. Growth: peak RSS over the "
        "RSS before the call; left: RSS after it returns over the RSS "
        "before."
    )
    header = (
        "| {} | peak growth (GiB) | / largest | / model | / goal | "
        "left (GiB) | left / model | seconds |"
    )
    print()
    save_goal = 1.1 * largest
    print(
        f"Saving (the model is in memory before; goal: growth < 1.1 x "
        f"largest = {save_goal / GIB:.3f} GiB, left ~0)"
    )
    print()
    print(header.format("saver"))
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, measured in saves.items():
        _row(label, measured, model, largest, save_goal)
    print()
    load_goal = 1.1 * (model + largest)
    print(
        f"Loading (goal: growth < 1.1 x (model + largest) = "
        f"{load_goal / GIB:.3f} GiB, left ~ the model)"
    )
    print()
    print(header.format("loader"))
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, method, sharded in [
        ("`Backbone.from_preset`, (1, 8)", "keras_nlp", True),
        ("`Backbone.from_preset`, unsharded", "keras_nlp", False),
        ("random weights + Keras `load_weights`, (1, 8)", "keras", True),
    ]:
        measured = _child("load", preset, method, sharded)
        _row(label, measured, model, largest, load_goal)
    hf = os.path.join(directory, "huggingface")
    _child("save", hf, args.layers, "huggingface", True)
    print()
    size = os.path.getsize(os.path.join(hf, "model.safetensors"))
    print(
        "Loading the same weights as a Hugging Face checkpoint "
        f"(model.safetensors, {size / GIB:.3f} GiB; same goal)"
    )
    print()
    print(header.format("loader"))
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, method, sharded in [
        (
            "`Backbone.from_preset` of the HF directory, (1, 8)",
            "huggingface",
            True,
        ),
        (
            "`Backbone.from_preset` of the HF directory, unsharded",
            "huggingface",
            False,
        ),
        (
            "keras-hub `Backbone.from_preset` of the HF directory",
            "keras_hub",
            False,
        ),
    ]:
        measured = _child("load", hf, method, sharded)
        _row(label, measured, model, largest, load_goal)
    if not args.keep:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
