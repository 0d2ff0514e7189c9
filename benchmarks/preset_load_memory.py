"""Peak host memory of loading a ~1 GB preset into a (1, 8) mesh.

Writes a Llama-shaped preset of about 1 GB (float32, heads that divide 8, so
the plan shards everything), then loads it in a fresh process on 8 fake CPU
devices, where device memory is host memory. Reports the loading process's
peak RSS over its RSS just before loading, against the goal: the model's
size plus its largest tensor, plus 10%. The same is measured for Keras's own
`load_weights` on the same sharded backbone, which reads each tensor whole
before placing it.

Run: python benchmarks/preset_load_memory.py [--layers 3] [--keep DIR]
"""

import argparse
import json
import os
import resource
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


def _setup():
    os.environ.setdefault("KERAS_BACKEND", "jax")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"


def _rss_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def write_preset(path, layers):
    _setup()
    from keras_nlp.models import Llama3Backbone

    backbone = Llama3Backbone(num_layers=layers, **CONFIG)
    backbone.save_to_preset(path)
    largest = max(int(v.value.nbytes) for v in backbone.weights)
    total = sum(int(v.value.nbytes) for v in backbone.weights)
    return {"bytes": total, "largest_bytes": largest}


def load_preset(path, method):
    """Runs in a fresh process: loads `path` under (1, 8), reports RSS."""
    _setup()
    import keras

    from keras_nlp.models import Backbone

    devices = keras.distribution.list_devices()
    mesh = keras.distribution.DeviceMesh((1, 8), ("batch", "model"), devices)
    distribution = keras.distribution.ModelParallel(
        layout_map=Backbone.get_layout_map(mesh), batch_dim_name="batch"
    )
    before = _rss_bytes()
    start = time.perf_counter()
    with distribution.scope():
        if method == "keras_nlp":
            backbone = Backbone.from_preset(path)
        else:
            backbone = Backbone.from_preset(path, load_weights=False)
            backbone.load_weights(os.path.join(path, "model.weights.h5"))
    seconds = time.perf_counter() - start
    return {
        "method": method,
        "rss_before": before,
        "peak_rss": _peak_rss_bytes(),
        "seconds": seconds,
        "memory_ratio": backbone.layout_plan.memory_ratio,
    }


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

    directory = args.keep or tempfile.mkdtemp(prefix="preset_load_memory_")
    sizes = _child("write_preset", directory, args.layers)
    model, largest = sizes["bytes"], sizes["largest_bytes"]
    goal = 1.1 * (model + largest)
    gib = 1024**3
    print(
        f"preset: {model / gib:.3f} GiB ({args.layers} Llama-shaped layers), "
        f"largest tensor {largest / gib:.3f} GiB; goal: peak RSS over the "
        f"RSS before loading < 1.1 x (model + largest) = {goal / gib:.3f} GiB"
    )
    print()
    print(
        "| loader | RSS before (GiB) | peak RSS (GiB) | growth (GiB) | "
        "growth / model | growth / goal | seconds |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for method in ("keras_nlp", "keras_load_weights"):
        measured = _child("load_preset", directory, method)
        growth = measured["peak_rss"] - measured["rss_before"]
        print(
            f"| {method} | {measured['rss_before'] / gib:.3f} | "
            f"{measured['peak_rss'] / gib:.3f} | {growth / gib:.3f} | "
            f"{growth / model:.3f} | {growth / goal:.3f} | "
            f"{measured['seconds']:.1f} |"
        )
    if not args.keep:
        import shutil

        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
