"""How long a layout plan takes and how much memory it needs, per preset.

Plans come from an abstract build (no weight is allocated), so even
DeepSeek-V3's 671B parameters or Llama 4 Maverick's 400B plan in seconds
and well under 1 GiB of RSS, on 64 or 256 devices as on 8. Each preset
and mesh is planned in a fresh process, so its time includes the
abstract build (the import of keras_nlp is timed apart) and its RSS is
its own. Bytes per device count the weights in `--dtype`.

Run: python benchmarks/plan_cost.py [--mesh 1x2 1x8 2x4] [--preset NAME ...]
     [--dtype bfloat16]
A mesh of three sizes is (batch, expert, model): `1x8x8` is 64 devices.
Results for the largest presets: benchmarks/plan_cost.md.
"""

import argparse
import json
import os
import subprocess
import sys

CHILD = """
import json, sys, time
start = time.perf_counter()
from keras_nlp.distribution import MeshShape
from keras_nlp.models import Backbone
imported = time.perf_counter() - start

def peak_rss_mib():
    # VmHWM starts afresh at exec (ru_maxrss would include the parent's).
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024

mesh = MeshShape.parse(sys.argv[2])
start, cpu = time.perf_counter(), time.process_time()
plan = Backbone.plan_layout(mesh, preset=sys.argv[1], dtype=sys.argv[3])
print(json.dumps({
    "import": imported,
    "seconds": time.perf_counter() - start,
    "cpu": time.process_time() - cpu,
    "rss_mib": peak_rss_mib(),
    "params": plan.total_params,
    "devices": plan.num_devices,
    "bytes": plan.bytes_per_device,
    "ideal": plan.ideal_bytes_per_device,
    "ratio": plan.memory_ratio,
    "fallbacks": len(plan.fallbacks),
}))
"""
GIB = 2**30


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mesh", nargs="+", default=["1x2", "1x8", "2x4"])
    parser.add_argument(
        "--preset", nargs="+", help="presets to plan (default: every one)"
    )
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()

    from keras_nlp.models import Backbone

    presets = args.preset or Backbone._available_presets()
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    print(
        "| preset | mesh | devices | parameters | import s | plan s (CPU) "
        f"| peak RSS MiB | GiB per device ({args.dtype}) | ideal GiB "
        "| ratio | fallbacks |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mesh in args.mesh:
        for preset in presets:
            result = subprocess.run(
                [sys.executable, "-c", CHILD, preset, mesh, args.dtype],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            row = json.loads(result.stdout.strip().splitlines()[-1])
            print(
                f"| {preset} | {mesh} | {row['devices']} | {row['params']:,} "
                f"| {row['import']:.1f} | {row['seconds']:.2f} "
                f"({row['cpu']:.2f}) | {row['rss_mib']:.0f} "
                f"| {row['bytes'] / GIB:.2f} | {row['ideal'] / GIB:.2f} "
                f"| {row['ratio']:.4f} | {row['fallbacks']} |"
            )


if __name__ == "__main__":
    main()
