"""Per-device memory of every built-in preset's plan on every mesh.

For each preset of each backbone and each (batch, model) mesh, prints the
plan's max per-device parameters over the ideal (total / devices) and, when
weights fall back, how many and which dimension held them back. Plans come
from abstract builds: nothing is allocated, so this runs on any laptop.

Run: python benchmarks/plan_table.py [--mesh 1x2 1x8] [--output table.md]
"""

import argparse
import collections
import os
import time

MESHES = ["1x2", "1x4", "1x8", "2x4", "4x2", "8x1"]


def fallback_summary(plan):
    """E.g. '72 kv_heads' for 72 weights held back by their kv_heads dim."""
    counts = collections.Counter()
    for weight in plan.fallbacks:
        for fallback in weight.fallbacks:
            counts[fallback.dim_name or f"dim {fallback.dim}"] += 1
    return ", ".join(f"{n} {name}" for name, n in sorted(counts.items()))


def cell(plan):
    text = f"{plan.memory_ratio:.3f}"
    summary = fallback_summary(plan)
    return f"{text} ({summary})" if summary else text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mesh", nargs="+", default=MESHES)
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args()

    os.environ.setdefault("KERAS_BACKEND", "jax")
    from keras_nlp.distribution import MeshShape
    from keras_nlp.models import Backbone

    meshes = [MeshShape.parse(mesh) for mesh in args.mesh]
    lines = [
        "| preset | class | parameters | " + " | ".join(args.mesh) + " |",
        "|---|---|---:|" + "---:|" * len(meshes),
    ]
    flagged = []
    start = time.perf_counter()
    for preset in Backbone._available_presets():
        plans = [Backbone.plan_layout(mesh, preset=preset) for mesh in meshes]
        for mesh_name, plan in zip(args.mesh, plans, strict=True):
            not_heads = [
                weight.path
                for weight in plan.fallbacks
                if "heads" not in weight.reason
            ]
            if plan.memory_ratio > 1.02 and not_heads:
                flagged.append(f"{preset} on {mesh_name}: {not_heads[0]}")
        lines.append(
            f"| {preset} | {plans[0].backbone} | "
            f"{plans[0].total_params:,} | "
            + " | ".join(cell(plan) for plan in plans)
            + " |"
        )
        print(lines[-1], flush=True)
    table = "\n".join(lines)
    print()
    print(table)
    print(
        f"\n{len(lines) - 2} presets x {len(meshes)} meshes planned in "
        f"{time.perf_counter() - start:.1f} s"
    )
    if args.output:
        with open(args.output, "w") as file:
            file.write(table + "\n")
    # Over the 2% bound for a reason other than atomic heads.
    for line in flagged:
        print("over 1.02, not heads:", line)


if __name__ == "__main__":
    main()
