"""Checks the cost model's choices against compiled HLO, and tabulates memory.

Part 1. For every config of `_sharded_configs.py` and mesh where a weight
has a choice (an axis that does not divide the dimension its rule names:
Gemma's single key/value head, GPT-2's 12 heads on an 8-way axis), builds
one layout per candidate (every weight with a choice takes its k-th
candidate: k = 0 replicates, k = 1 moves the axis), compiles its training
step on 8 fake CPU devices and reads the collectives from the HLO
(`collectives.collective_stats`) and the parameter bytes per device. The
same scalar as the cost model (`CostModel.time_us`: link bytes, all-reduces
counted twice, over the link bandwidth, plus per-step HBM bytes of weights,
gradients and Adam state over the HBM bandwidth) is applied to the
predicted (`estimate_plan`) and measured numbers; a case PASSes when the
layout `policy="auto"` picks is the measured cheaper one. Each case runs at
three token counts per step, 128 (2 x 64), 512 (8 x 64) and 16384
(256 x 64), since the choice can flip between them. Exits non-zero on any FAIL.

Part 2. Per-device parameter bytes over the ideal (total / devices) of
`policy="memory"` and `policy="auto"` for every built-in preset of 1B+
parameters on the six two-axis meshes (planned abstractly, no devices).

Run: python benchmarks/policy_costs.py [--skip-presets] [--output out.md]
"""

import argparse
import dataclasses
import sys
import time

if __name__ == "__main__":
    # Fake devices must be requested before JAX is imported.
    from _sharded_configs import setup_devices

    setup_devices()

LEGEND = """\
Part 1: per config, mesh and tokens per step, one row per candidate layout
(k = 0: every weight with a choice replicated along the axis; k = 1: the
axis moved to the hidden dimension). Predicted: `estimate_plan` of the
plan; measured: the compiled training step's collectives (HLO) and
parameter bytes per device. Both columns of microseconds apply the same
scalar (all-reduces count twice, 400 GB/s links, Adam's 10 bytes touched
per parameter byte at 3.2 TB/s). PASS: the layout `policy="auto"` picks
(chosen) is the measured cheaper one (or within 1% of it: two plans that
XLA lays out nearly alike are a tie). float32; 8 fake CPU devices; our
layout maps with each candidate's weights and the activation layouts
planned for them, q/k/v and gate/up fused where sharded.

Part 2: per-device parameter bytes / ideal of `--policy memory` / the
default `--policy auto` (16384 tokens per step) for every built-in preset
of 1B+ parameters on the six two-axis (batch x model) meshes."""
TIE = 0.01  # measured times within 1% count as equal
TOKEN_BATCHES = (2, 8, 256)  # sequences of `SEQUENCE` tokens per step
MESHES = [(1, 8), (2, 4)]
PRESET_MESHES = ["1x2", "1x4", "1x8", "2x4", "4x2", "8x1"]


def candidate_plan(plan, k):
    """`plan` with every weight that had a choice on its k-th candidate."""
    weights = []
    for weight in plan.weights:
        if weight.candidates:
            option = weight.candidates[min(k, len(weight.candidates) - 1)]
            weight = dataclasses.replace(weight, spec=option.spec)
        weights.append(weight)
    return dataclasses.replace(plan, weights=tuple(weights))


def our_layout_map(cls, config, plan, mesh):
    """Our layout map following `plan`'s weights and their activations."""
    from keras_nlp.distribution.activations import plan_activations
    from keras_nlp.distribution.backbone_planner import backbone_layers

    layout_map = cls.get_layout_map(mesh, config=config)
    activations = plan_activations(
        backbone_layers(cls, config),
        plan.weights,
        hidden_dim=config.get("hidden_dim"),
        model_axes=(plan.model_axis,),
        batch_axes=tuple(a for a in (plan.data_axis, plan.fsdp_axis) if a),
    )
    layout_map._install(dataclasses.replace(plan, activations=activations))
    return layout_map


def measured(cls, config, plan, mesh, model):
    """The measured `(link-scaled time, collectives, param bytes)`."""
    import _sharded_configs as shared
    from collectives import collective_stats

    backbone, distribution = shared.build(
        cls, config, our_layout_map(cls, config, plan, mesh)
    )
    step = shared.Step(backbone, distribution)
    stats = collective_stats(step.compiled_text("train"))
    collectives = {kind: stat.bytes for kind, stat in stats.items()}
    params = step.param_bytes_per_device
    touched = params * model.touched_factor()
    return model.time_us(collectives, touched), collectives, params


def _mb(count):
    return f"{count / 1e6:.2f}"


def check_choices(lines):
    """Part 1; returns the number of FAILs."""
    import _sharded_configs as shared

    from keras_nlp.distribution.cost import CostModel
    from keras_nlp.distribution.cost import estimate_plan

    lines += [
        "| config | mesh | tokens | layout | predicted us | measured us | "
        "predicted coll. MB | measured coll. MB | predicted params MB | "
        "measured params MB | auto | result |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    failures = 0
    for name, (class_name, config) in shared.CONFIGS.items():
        cls = shared.our_class(class_name)
        for mesh_shape in MESHES:
            mesh = shared.device_mesh(mesh_shape)
            for batch in TOKEN_BATCHES:
                tokens = batch * shared.SEQUENCE
                shared.BATCH = batch  # `inputs` reads it when called
                model = CostModel(tokens_per_step=tokens)
                auto = cls.plan_layout(
                    mesh, config=config, tokens_per_step=tokens
                )
                counts = [len(w.candidates) for w in auto.weights]
                if max(counts) < 2:
                    break  # no choice on this mesh, at any token count
                rows = []
                for k in range(max(counts)):
                    plan = candidate_plan(auto, k)
                    labels = {
                        w.candidates[min(k, len(w.candidates) - 1)].label
                        for w in auto.weights
                        if w.candidates
                    }
                    predicted = estimate_plan(plan, model)
                    actual = measured(cls, config, plan, mesh, model)
                    is_auto = plan.weights == auto.weights
                    rows.append((k, labels, predicted, actual, is_auto))
                best_measured = min(rows, key=lambda r: r[3][0])
                auto_rows = [r for r in rows if r[4]]
                # Measured within TIE of the best is as good as the best:
                # XLA may lay two plans out nearly alike.
                best = best_measured[3][0]
                passed = bool(auto_rows) and (
                    auto_rows[0][3][0] <= best * (1 + TIE)
                )
                failures += not passed
                for k, labels, predicted, actual, is_auto in rows:
                    time_us, collectives, params = actual
                    lines.append(
                        f"| {name} | {shared.mesh_name(mesh_shape)} | "
                        f"{tokens} | {k}: {'; '.join(sorted(labels))} | "
                        f"{predicted.time_us:.1f} | {time_us:.1f} | "
                        f"{_mb(predicted.collective_bytes)} | "
                        f"{_mb(sum(collectives.values()))} | "
                        f"{_mb(predicted.state_bytes / 4)} | {_mb(params)} | "
                        f"{'chosen' if is_auto else ''} | "
                        f"{'PASS' if passed else 'FAIL'} |"
                    )
                    print(lines[-1], flush=True)
    shared.BATCH = TOKEN_BATCHES[0]
    return failures


def preset_table(lines):
    """Part 2: memory and auto ratios of every 1B+ preset."""
    from keras_nlp.distribution import MeshShape
    from keras_nlp.models import Backbone

    meshes = [MeshShape.parse(mesh) for mesh in PRESET_MESHES]
    lines += [
        "| preset | parameters | "
        + " | ".join(f"{m} memory / auto" for m in PRESET_MESHES)
        + " |",
        "|---|---:|" + "---:|" * len(meshes),
    ]
    worst = 0.0
    for preset in Backbone._available_presets():
        first = Backbone.plan_layout(meshes[0], preset=preset)
        if first.total_params < 1e9:
            continue
        cells = []
        for mesh in meshes:
            memory = Backbone.plan_layout(mesh, preset=preset, policy="memory")
            auto = Backbone.plan_layout(mesh, preset=preset)
            worst = max(worst, memory.memory_ratio)
            cells.append(f"{memory.memory_ratio:.3f} / {auto.memory_ratio:.3f}")
        lines.append(
            f"| {preset} | {first.total_params:,} | " + " | ".join(cells) + " |"
        )
        print(lines[-1], flush=True)
    return worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-presets", action="store_true")
    parser.add_argument("--output", help="also write the tables to this file")
    args = parser.parse_args()

    start = time.perf_counter()
    lines = []
    failures = check_choices(lines)
    checked = time.perf_counter() - start
    worst = None
    if not args.skip_presets:
        lines.append("")
        worst = preset_table(lines)
    elapsed = time.perf_counter() - start
    summary = (
        f"{failures} FAIL(s) in the choice check ({checked:.0f} s)"
        + (
            f"; worst --policy memory ratio of a 1B+ preset: {worst:.3f}"
            if worst is not None
            else ""
        )
        + f"; {elapsed:.0f} s in all."
    )
    print()
    print("\n".join(lines))
    print(summary)
    if args.output:
        with open(args.output, "w") as file:
            file.write(LEGEND + "\n\n" + "\n".join(lines))
            file.write("\n\n" + summary + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
