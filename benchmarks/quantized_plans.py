"""Per-device bytes of quantized plans: every built-in preset of 1B+
parameters in int8 and int4, on the six two-axis meshes.

For each preset and mesh, prints the quantized plan's per-device bytes
over the ideal (all bytes, scales, zeros and group indices included, over
the devices), and the int8 / bfloat16 and int4 / bfloat16 per-device byte
ratios (the float weights of the quantized models in bfloat16, as Keras's
`int8_from_bfloat16`). Plans come from abstract builds and
`quantized_config`: nothing is allocated or quantized.

Run: python benchmarks/quantized_plans.py [--mesh 1x8 2x4] [--min-params 1e9]
"""

import argparse
import os
import time

MESHES = ["1x2", "1x4", "1x8", "2x4", "4x2", "8x1"]
MODES = ["int8", "int4"]
BOUND = 1.06


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mesh", nargs="+", default=MESHES)
    parser.add_argument("--min-params", type=float, default=1e9)
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args()

    os.environ.setdefault("KERAS_BACKEND", "jax")
    from keras_nlp.distribution import MeshShape
    from keras_nlp.models import Backbone

    meshes = [MeshShape.parse(mesh) for mesh in args.mesh]
    header = " | ".join(
        f"{mode} {mesh}" for mode in MODES for mesh in args.mesh
    )
    lines = [
        f"| preset | parameters | {header} | int8/bf16 | int4/bf16 |",
        "|---|---:|" + "---:|" * (len(MODES) * len(meshes) + 2),
    ]
    worst = {mode: (0.0, None) for mode in MODES}
    over = []
    start = time.perf_counter()
    for preset in Backbone._available_presets():
        probe = Backbone.plan_layout(meshes[0], preset=preset)
        if probe.total_params < args.min_params:
            continue
        cells, ratios = [], {}
        for mode in MODES:
            byte_ratios = []
            for name, mesh in zip(args.mesh, meshes, strict=True):
                plan = Backbone.plan_layout(
                    mesh, preset=preset, dtype="bfloat16", quantize=mode
                )
                cells.append(f"{plan.memory_ratio:.3f}")
                if plan.memory_ratio > worst[mode][0]:
                    worst[mode] = (plan.memory_ratio, f"{preset} on {name}")
                float_plan = Backbone.plan_layout(
                    mesh, preset=preset, dtype="bfloat16"
                )
                if plan.memory_ratio > BOUND:
                    over.append((preset, name, mesh, mode, plan, float_plan))
                byte_ratios.append(
                    plan.bytes_per_device / float_plan.bytes_per_device
                )
            ratios[mode] = f"{min(byte_ratios):.3f}-{max(byte_ratios):.3f}"
        lines.append(
            f"| {preset} | {probe.total_params:,} | {' | '.join(cells)} | "
            f"{ratios['int8']} | {ratios['int4']} |"
        )
        print(lines[-1], flush=True)
    table = "\n".join(lines)
    print()
    print(table)
    print(
        f"\n{len(lines) - 2} presets x {len(meshes)} meshes x {len(MODES)} "
        f"modes planned in {time.perf_counter() - start:.1f} s"
    )
    notes = [
        "",
        f"Over {BOUND}: the float plan's ratio there (the same weights in "
        "bfloat16, default policy), and the quantized plan's with "
        "`policy='memory'` (which splits heads' other dimensions rather "
        "than replicate them):",
        "",
        "| preset | mesh | mode | quantized | float | quantized, memory "
        "policy |",
        "|---|---|---|---:|---:|---:|",
    ]
    for preset, name, mesh, mode, plan, float_plan in over:
        memory = Backbone.plan_layout(
            mesh,
            preset=preset,
            dtype="bfloat16",
            quantize=mode,
            policy="memory",
        )
        notes.append(
            f"| {preset} | {name} | {mode} | {plan.memory_ratio:.3f} | "
            f"{float_plan.memory_ratio:.3f} | {memory.memory_ratio:.3f} |"
        )
    for mode, (ratio, where) in worst.items():
        verdict = "within" if ratio <= BOUND else "over"
        notes.append(
            f"\n{mode}: worst {ratio:.3f} ({where}), {verdict} {BOUND}."
        )
    print("\n".join(notes))
    if args.output:
        with open(args.output, "w") as file:
            file.write(table + "\n" + "\n".join(notes) + "\n")


if __name__ == "__main__":
    main()
