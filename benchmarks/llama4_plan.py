"""Llama 4 Maverick's layout plan from its config alone: time and bytes.

The 400B-parameter `llama4_maverick_17b_128e` preset is planned from its
config (an abstract build: no weight is allocated, no device is needed) on
the 8-device meshes of the plan table, on 64 devices, (expert 8, model 8),
and on 256, (batch 4, expert 8, model 8). Each mesh is planned in a fresh
process, so its time includes the abstract build (not the import of
keras_nlp, printed apart) and its peak RSS is its own. Bytes count
bfloat16 weights, as the checkpoint stores them.

Run: python benchmarks/llama4_plan.py [--preset llama4_scout_17b_16e]
Results: benchmarks/llama4_plan.md.
"""

import argparse
import json
import os
import subprocess
import sys

MESHES = [
    {"batch": 1, "model": 8},
    {"batch": 2, "model": 4},
    {"batch": 1, "expert": 4, "model": 2},
    {"batch": 1, "expert": 8, "model": 8},
    {"batch": 4, "expert": 8, "model": 8},
]
CHILD = """
import json, sys, time
start = time.perf_counter()
from keras_nlp.models import Llama4Backbone
imported = time.perf_counter() - start

def peak_rss_mib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024

start = time.perf_counter()
plan = Llama4Backbone.plan_layout(
    json.loads(sys.argv[2]), preset=sys.argv[1], dtype="bfloat16"
)
print(json.dumps({
    "import": imported,
    "seconds": time.perf_counter() - start,
    "rss_mib": peak_rss_mib(),
    "params": plan.total_params,
    "bytes": plan.bytes_per_device,
    "ideal": plan.ideal_bytes_per_device,
    "ratio": plan.memory_ratio,
    "fallbacks": len(plan.fallbacks),
}))
"""
GIB = 2**30


def plan_in_child(preset, mesh):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    result = subprocess.run(
        [sys.executable, "-c", CHILD, preset, json.dumps(mesh)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="llama4_maverick_17b_128e")
    args = parser.parse_args()
    print(
        "| mesh | devices | import (s) | plan (s) | peak RSS (MiB) "
        "| bytes per device (GiB) | ideal (GiB) | ratio | fallbacks |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mesh in MESHES:
        row = plan_in_child(args.preset, mesh)
        devices = 1
        for size in mesh.values():
            devices *= size
        shape = " x ".join(f"{name} {size}" for name, size in mesh.items())
        print(
            f"| {shape} | {devices} | {row['import']:.1f} "
            f"| {row['seconds']:.2f} | {row['rss_mib']:.0f} "
            f"| {row['bytes'] / GIB:.2f} | {row['ideal'] / GIB:.2f} "
            f"| {row['ratio']:.4f} | {row['fallbacks']} |"
        )
    print(f"\n{args.preset}: {row['params']:,} parameters")


if __name__ == "__main__":
    main()
