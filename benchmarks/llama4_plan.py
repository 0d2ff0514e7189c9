"""Llama 4 Maverick's layout plan from its config alone: time and bytes.

The 400B-parameter `llama4_maverick_17b_128e` preset is planned from its
config (an abstract build: no weight is allocated, no device is needed) on
64 devices, (expert 8, model 8), and 256, (batch 4, expert 8, model 8),
and on the 8-device meshes of the plan table. Bytes count bfloat16 weights,
as the checkpoint stores them. Each mesh's time includes its abstract build.

Run: python benchmarks/llama4_plan.py [--preset llama4_scout_17b_16e]
Results: benchmarks/llama4_plan.md.
"""

import argparse
import time

MESHES = [
    {"batch": 1, "model": 8},
    {"batch": 2, "model": 4},
    {"batch": 1, "expert": 4, "model": 2},
    {"batch": 1, "expert": 8, "model": 8},
    {"batch": 4, "expert": 8, "model": 8},
]
GIB = 2**30


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="llama4_maverick_17b_128e")
    args = parser.parse_args()
    start = time.perf_counter()
    from keras_nlp.models import Llama4Backbone

    print(f"import keras_nlp: {time.perf_counter() - start:.2f} s")
    print(
        "| mesh | devices | plan time (s) | bytes per device (GiB) "
        "| ideal (GiB) | ratio | fallbacks |"
    )
    print("|---|---|---|---|---|---|---|")
    for mesh in MESHES:
        start = time.perf_counter()
        plan = Llama4Backbone.plan_layout(
            mesh, preset=args.preset, dtype="bfloat16"
        )
        seconds = time.perf_counter() - start
        devices = 1
        for size in mesh.values():
            devices *= size
        shape = " x ".join(f"{name} {size}" for name, size in mesh.items())
        print(
            f"| {shape} | {devices} | {seconds:.2f} "
            f"| {plan.bytes_per_device / GIB:.2f} "
            f"| {plan.ideal_bytes_per_device / GIB:.2f} "
            f"| {plan.memory_ratio:.4f} | {len(plan.fallbacks)} |"
        )
    print(f"total parameters: {plan.total_params:,}")


if __name__ == "__main__":
    main()
