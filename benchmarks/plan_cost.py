"""How long a layout plan takes and how much memory it needs, per preset.

Plans come from an abstract build (no weight is allocated), so even the
27B-parameter preset should plan in seconds and well under 1 GiB of RSS.
Each preset is planned in a fresh process so RSS is its own.

Run: python benchmarks/plan_cost.py [--mesh 1x8]
"""

import argparse
import json
import os
import subprocess
import sys

CHILD = """
import json, resource, sys, time
from keras_nlp.distribution import MeshShape
from keras_nlp.models import Backbone
mesh = MeshShape.parse(sys.argv[2])
start = time.perf_counter()
plan = Backbone.plan_layout(mesh, preset=sys.argv[1])
seconds = time.perf_counter() - start
print(json.dumps({
    "seconds": seconds,
    "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "params": plan.total_params,
    "ratio": plan.memory_ratio,
    "fallbacks": len(plan.fallbacks),
}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mesh", default="1x8")
    args = parser.parse_args()

    from keras_nlp.models import Backbone

    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    print(f"mesh {args.mesh} (batch x model)")
    header = f"{'preset':<24}{'params':>16}{'plan s':>9}{'peak RSS MiB':>14}"
    print(header + f"{'per-device/ideal':>18}{'fallbacks':>11}")
    for preset in Backbone._available_presets():
        result = subprocess.run(
            [sys.executable, "-c", CHILD, preset, args.mesh],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        row = json.loads(result.stdout.strip().splitlines()[-1])
        print(
            f"{preset:<24}{row['params']:>16,}{row['seconds']:>9.2f}"
            f"{row['rss_mib']:>14.0f}{row['ratio']:>18.3f}"
            f"{row['fallbacks']:>11}"
        )


if __name__ == "__main__":
    main()
