"""Time of a sharded training step over the same step on one device.

For the scaled-down configs of `_sharded_configs.py`, times the jitted
training step (next-token cross-entropy and the gradients of every
trainable variable) built with no distribution on one device, and under our
layout map on 8 fake CPU devices, and prints the median times and their
ratio. Fake CPU devices share the host's cores, so the ratio measures
partitioning and communication overhead, not a speedup.

Each mesh is measured before and after the communication work of issue
17 (see `_sharded_configs.our_layout_map`), in the same run.

Run: python benchmarks/step_time.py [--mesh 1x8 2x4] [--iterations 10]
    [--output out.md]
"""

import argparse
import statistics
import time

if __name__ == "__main__":
    # Fake devices must be requested before JAX is imported.
    from _sharded_configs import setup_devices

    setup_devices()


def median_seconds(step, warmups, iterations):
    """Median wall time of `step.run_train()` after `warmups` calls."""
    for _ in range(warmups):
        step.run_train()
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        step.run_train()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mesh", nargs="+", default=["1x8", "2x4"])
    parser.add_argument("--warmups", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args()

    import _sharded_configs as shared

    meshes = [tuple(int(n) for n in mesh.split("x")) for mesh in args.mesh]
    lines = [
        "Median training-step time (ms) over "
        f"{args.iterations} steps after {args.warmups} warm-ups; batch "
        f"{shared.BATCH}, sequence {shared.SEQUENCE}, float32. The 8 "
        "devices are fake CPU devices sharing the host's cores: the ratio "
        "(sharded / 1 device) measures partitioning and communication "
        "overhead, not speedup. Before: our layout as it was before issue "
        "17 (replication wherever heads do not divide, no activation "
        "layouts, separate q/k/v and gate/up matmuls); after: today's "
        "defaults; both measured in this run.",
        "",
        "| config | 1 device (ms) | "
        + " | ".join(
            f"{mesh} {when} (ms) | {mesh} {when} ratio"
            for mesh in args.mesh
            for when in ("before", "after")
        )
        + " |",
        "|---|---:|" + "---:|---:|" * 2 * len(meshes),
    ]
    start = time.perf_counter()
    for name, (class_name, config) in shared.CONFIGS.items():
        cls = shared.our_class(class_name)
        backbone, _ = shared.build(cls, config)
        single = median_seconds(
            shared.Step(backbone), args.warmups, args.iterations
        )
        cells = [f"{single * 1e3:.1f}"]
        for mesh_shape in meshes:
            mesh = shared.device_mesh(mesh_shape, "num_experts" in config)
            for before in (True, False):
                layout_map = shared.our_layout_map(cls, config, mesh, before)
                backbone, distribution = shared.build(cls, config, layout_map)
                step = shared.Step(backbone, distribution, fused=not before)
                sharded = median_seconds(step, args.warmups, args.iterations)
                cells += [f"{sharded * 1e3:.1f}", f"{sharded / single:.2f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    table = "\n".join(lines)
    print()
    print(table)
    print(f"\nMeasured in {time.perf_counter() - start:.0f} s")
    if args.output:
        with open(args.output, "w") as file:
            file.write(table + "\n")


if __name__ == "__main__":
    main()
