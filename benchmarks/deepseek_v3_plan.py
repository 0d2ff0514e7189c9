"""DeepSeek-V3 671B planned from its config alone: time and per-device bytes.

Plans `deepseek_v3_671b` (a built-in config; no weights anywhere) on 64
devices, `(expert 8, model 8)`, and 256 devices, `(batch 4, expert 8,
model 8)`, and on the 8-device meshes the plan table uses, in bfloat16.
Each plan comes from an abstract build: nothing is allocated. The first
plan's time includes that build (constructing 1,220 Keras layers); the
others reuse it. Wall time depends on what else the machine runs; the
process CPU time is printed beside it.

Run: python benchmarks/deepseek_v3_plan.py
"""

import os
import time

MESHES = [
    ("8x8 (expert, model), 64 devices", {"expert": 8, "model": 8}, "expert"),
    (
        "4x8x8 (batch, expert, model), 256 devices",
        {"batch": 4, "expert": 8, "model": 8},
        "expert",
    ),
    ("1x8 (batch, model)", {"batch": 1, "model": 8}, None),
    ("2x4 (batch, model)", {"batch": 2, "model": 4}, None),
    (
        "1x4x2 (batch, expert, model)",
        {"batch": 1, "expert": 4, "model": 2},
        "expert",
    ),
]
GIB = 2**30


def main():
    os.environ.setdefault("KERAS_BACKEND", "jax")
    start = time.perf_counter()
    from keras_nlp.models import DeepSeekV3Backbone

    imported = time.perf_counter() - start
    print(f"import keras_nlp: {imported:.2f} s")
    print(
        "| mesh | plan time, wall (CPU) s | parameters "
        "| bytes per device (bf16) | ideal | ratio | fallbacks | kv caches |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, mesh, expert_axis in MESHES:
        start, cpu = time.perf_counter(), time.process_time()
        plan = DeepSeekV3Backbone.plan_layout(
            mesh,
            preset="deepseek_v3_671b",
            data_parallel_dim_name="batch" if "batch" in mesh else None,
            expert_parallel_dim_name=expert_axis,
            dtype="bfloat16",
        )
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu
        print(
            f"| {name} | {seconds:.2f} ({cpu:.2f} CPU) | {plan.total_params:,} "
            f"| {plan.bytes_per_device / GIB:.2f} GiB "
            f"| {plan.ideal_bytes_per_device / GIB:.2f} GiB "
            f"| {plan.memory_ratio:.3f} | {len(plan.fallbacks)} "
            f"| {len(plan.kv_caches)}, length on "
            f"{sorted({a for c in plan.kv_caches for a in c.length_axes})} |"
        )


if __name__ == "__main__":
    main()
