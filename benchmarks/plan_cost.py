"""How long a layout plan takes and how much memory it needs, per preset.

Plans come from an abstract build (no weight is allocated), so even the
27B-parameter preset should plan in seconds and well under 1 GiB of RSS.
Each preset is planned in a fresh process so RSS is its own.

Run: python benchmarks/plan_cost.py [--mesh 1x2 1x8 2x4]
"""

import argparse
import json
import os
import subprocess
import sys

CHILD = """
import json, sys, time
from keras_nlp.distribution import MeshShape
from keras_nlp.models import Backbone

def peak_rss_mib():
    # VmHWM starts afresh at exec (ru_maxrss would include the parent's).
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024

mesh = MeshShape.parse(sys.argv[2])
start = time.perf_counter()
plan = Backbone.plan_layout(mesh, preset=sys.argv[1])
seconds = time.perf_counter() - start
print(json.dumps({
    "seconds": seconds,
    "rss_mib": peak_rss_mib(),
    "params": plan.total_params,
    "ratio": plan.memory_ratio,
    "fallbacks": len(plan.fallbacks),
}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mesh", nargs="+", default=["1x2", "1x8", "2x4"])
    args = parser.parse_args()

    from keras_nlp.models import Backbone

    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    header = f"{'preset':<24}{'mesh':>6}{'params':>16}{'plan s':>9}"
    print(
        header
        + f"{'peak RSS MiB':>14}{'per-device/ideal':>18}{'fallbacks':>11}"
    )
    for mesh in args.mesh:
        for preset in Backbone._available_presets():
            result = subprocess.run(
                [sys.executable, "-c", CHILD, preset, mesh],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            row = json.loads(result.stdout.strip().splitlines()[-1])
            print(
                f"{preset:<24}{mesh:>6}{row['params']:>16,}"
                f"{row['seconds']:>9.2f}{row['rss_mib']:>14.0f}"
                f"{row['ratio']:>18.3f}{row['fallbacks']:>11}"
            )


if __name__ == "__main__":
    main()
