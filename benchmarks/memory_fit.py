"""Will it fit? Predicted per-device memory against XLA's compiled memory.

For every decoder family (each class's tiny config scaled to 4 blocks,
hidden 256, a 2,048-token vocabulary, 8 query heads and the family's
query:key/value ratio), on 1x8, 2x4 and a three-axis mesh (data, fsdp,
model; batch, expert, model for mixtures of experts), prints
`keras_nlp.distribution.memory.estimate_memory`'s per-device total next to
the compiled program's (`compiled.memory_analysis()`: arguments + outputs
- aliased + temporaries), for:

- `train`: one AdamW training step (`CausalLM.train_step`, the state
  donated as `fit` does), batch 8 x 256 tokens;
- `train remat`: the same, built under `keras.RematScope(mode="full")`
  (on the first mesh only: see the note under the table);
- `generate`: `CausalLM.generate` with an 8 x 128-token prompt and a
  256-token context (the compiled loop: prefill, then decoding).

Nothing here is timed. Run:
    python benchmarks/memory_fit.py [--family Llama] [--mesh 1x8]
        [--output benchmarks/memory_fit.md]
"""

if __name__ == "__main__":
    from _sharded_configs import setup_devices

    setup_devices()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import keras_nlp  # noqa: E402
from keras_nlp.distribution.memory import Workload  # noqa: E402
from keras_nlp.distribution.memory import estimate_memory  # noqa: E402
from keras_nlp.models.causal_lm import causal_lm_class  # noqa: E402
from tests.models.tiny_configs import TINY_CONFIGS  # noqa: E402

BATCH = 8
SEQUENCE = 256
PROMPT = 128
MESHES = ["1x8", "2x4", "2x2x2"]
WORKLOADS = ["train", "train remat", "generate"]
MIB = 2**20
REMAT_NOTE = "CPU: remat undone by XLA (below)"
# Families that need more than token ids (images).
SKIPPED = {"PaliGemmaBackbone": "needs images"}


OUTSIDE_TEXT = """\
The coefficients are one set for every family (fitted to these rows and to
Llama, Gemma and Mixtral at 1 and 3 blocks). What XLA keeps for a block's
backward pass depends on its norm and activation: LayerNorm and GELU
(Bloom, Falcon, GPT-2) keep more residual-width tensors than the fit, ReLU
(OPT) fewer, and those tensors weigh most on 1x8, where every device has
all the tokens and the whole residual stream; generation on 1x8 follows
for GPT-2, GPT-NeoX and OPT. Features for norm and activation kinds were
tried and left these rows where they are (0.82-1.24), so they stay
outside, not fitted away. Llama 3 and Mistral on 2x4 (2 key/value heads
whole on a 4-way model axis) and Qwen3-MoE on 1x8 generate in less than
predicted, by 1.6-2 MiB: with key/value weights whole on the model axis
XLA keeps less than the fitted copies of gathered weights and prefill
tensors; Qwen3-MoE's training step on its (batch, expert, model) mesh
keeps more for the dense expert path than its widths say. Neither is
pinned down further here."""


REMAT_TEXT = """\
`train remat` rows: the backbone is built under `keras.RematScope(mode=
"full")` and each block is a `jax.checkpoint` in the traced program
(`tests/layers/test_remat.py` counts them), but XLA's CPU backend undoes
rematerialization: its common-subexpression pass merges the recomputed
forward pass with the first one, and with that pass disabled its schedule
still computes the copy early. A pure-JAX 8-block MLP shows the same
(280 MiB of temporaries with and without `jax.checkpoint`). The predicted
column is what an accelerator's memory-aware scheduler keeps; there is
no accelerator in this run to check it against."""


def scaled_config(name):
    """The class's tiny config at 4 blocks, hidden 256, 8 query heads."""
    config = dict(TINY_CONFIGS[name].configs["tiny"])
    query_key = next(
        k
        for k in ("num_query_heads", "num_heads", "num_attention_heads")
        if k in config
    )
    ratio = config[query_key] / config.get("num_key_value_heads", 1)
    config.update(vocabulary_size=2048, num_layers=4, hidden_dim=256)
    config[query_key] = 8
    if "num_key_value_heads" in config:
        config["num_key_value_heads"] = max(1, int(8 / ratio))
    for key, value in (
        ("intermediate_dim", 512),
        ("head_dim", 32),
        ("moe_intermediate_dim", 128),
        ("shared_expert_intermediate_dim", 256),
        ("num_experts", 8),
        ("max_sequence_length", 512),
        ("image_size", None),
    ):
        if key in config:
            config[key] = value
    # Dropout off, as when fine-tuning most LLMs: the memory model does not
    # count dropout's masks (it says so when a config has dropout).
    cls = getattr(keras_nlp.models, name)
    for key in inspect.signature(cls.__init__).parameters:
        if "dropout" in key:
            config[key] = 0.0
    return config


def mesh_roles(mesh_text, config):
    shape = tuple(int(v) for v in mesh_text.split("x"))
    if len(shape) == 2:
        return shape, ("batch", "model"), {}, "batch"
    if "num_experts" in config:
        return (
            shape,
            ("batch", "expert", "model"),
            {"expert_parallel_dim_name": "expert"},
            "batch",
        )
    return (
        shape,
        ("data", "fsdp", "model"),
        {"data_parallel_dim_name": "data", "fsdp_dim_name": "fsdp"},
        ("data", "fsdp"),
    )


def build(name, config, mesh_text, remat):
    cls = getattr(keras_nlp.models, name)
    shape, axes, roles, batch_dims = mesh_roles(mesh_text, config)
    devices = keras.distribution.list_devices()[: math.prod(shape)]
    mesh = keras.distribution.DeviceMesh(shape, axes, devices)
    layout_map = cls.get_layout_map(mesh, config=config, **roles)
    distribution = keras_nlp.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name=batch_dims
    )
    keras.utils.set_random_seed(0)
    scope = keras.RematScope(mode="full") if remat else contextlib.nullcontext()
    with distribution.scope():
        with scope:
            backbone = cls(**config)
        task = causal_lm_class(cls)(backbone, compile=False)
        task.compile(optimizer=keras.optimizers.AdamW(1e-3))
    plan = cls.plan_layout(
        dict(zip(axes, shape, strict=True)), config=config, **roles
    )
    return task, distribution, plan


def _total(analysis):
    return (
        analysis.argument_size_in_bytes
        + analysis.output_size_in_bytes
        - analysis.alias_size_in_bytes
        + analysis.temp_size_in_bytes
    )


def compiled_train_bytes(task, distribution):
    """XLA's per-device bytes of one donated training step."""
    with distribution.scope():
        task.optimizer.build(task.trainable_variables)
        task.built = True
        state = (
            [v.value for v in task.trainable_variables],
            [v.value for v in task.non_trainable_variables],
            [v.value for v in task.optimizer.variables],
            [v.value for v in task.metrics_variables],
        )
        sharding = distribution.get_data_layout((BATCH, SEQUENCE))
        spec = jax.ShapeDtypeStruct(
            (BATCH, SEQUENCE), "int32", sharding=sharding.backend_layout
        )
        data = ({"token_ids": spec, "padding_mask": spec}, None, None)
        step = jax.jit(task.train_step, donate_argnums=0)
        compiled = step.lower(state, data).compile()
    return _total(compiled.memory_analysis())


class _RecordingJit:
    """`jax.jit` that also records each compiled program's memory."""

    def __init__(self, records):
        self.records = records
        self.jit = jax.jit

    def __call__(self, function, **kwargs):
        jitted = self.jit(function, **kwargs)
        records = self.records

        def run(*args):
            compiled = jitted.lower(*args).compile()
            records.append(_total(compiled.memory_analysis()))
            return compiled(*args)

        return run


def compiled_generate_bytes(task, distribution):
    """XLA's per-device bytes of the compiled generation loop."""
    rng = np.random.default_rng(0)
    vocabulary = task.backbone.vocabulary_size
    prompts = {
        "token_ids": rng.integers(1, vocabulary, (BATCH, PROMPT), "int32"),
        "padding_mask": np.ones((BATCH, PROMPT), "int32"),
    }
    records = []
    jax.jit = _RecordingJit(records)
    try:
        with distribution.scope():
            task.generate(prompts, max_length=SEQUENCE)
    finally:
        jax.jit = jax.jit.jit
    return max(records)


def predicted_bytes(plan, workload_name):
    # On CPU `ExpertBank` runs every expert on every token (dense).
    experts = "dense"
    if workload_name == "generate":
        workload = Workload(
            "generate",
            BATCH,
            SEQUENCE,
            prompt_length=PROMPT,
            expert_compute=experts,
        )
    else:
        remat = "full" if "remat" in workload_name else "none"
        workload = Workload(
            "train", BATCH, SEQUENCE, remat=remat, expert_compute=experts
        )
    return estimate_memory(plan, workload).total


def decoder_families():
    names = []
    for name in sorted(TINY_CONFIGS):
        cls = getattr(keras_nlp.models, name, None)
        try:
            causal_lm_class(cls)
        except (TypeError, ValueError, KeyError):
            continue
        names.append(name)
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", nargs="*", default=None)
    parser.add_argument("--mesh", nargs="*", default=MESHES)
    parser.add_argument("--workload", nargs="*", default=WORKLOADS)
    parser.add_argument("--output", default=None)
    parser.add_argument(
        "--raw", default=None, help="also append each row as JSON to FILE"
    )
    args = parser.parse_args()
    names = [
        name
        for name in decoder_families()
        if not args.family
        or any(f.lower() in name.lower() for f in args.family)
    ]
    rows = []
    ratios = []
    started = time.time()
    for name in names:
        if name in SKIPPED:
            rows.append(f"| {name} | - | - | - | - | - | {SKIPPED[name]} |")
            continue
        config = scaled_config(name)
        for mesh_text in args.mesh:
            for workload_name in args.workload:
                remat = "remat" in workload_name
                if remat and mesh_text != args.mesh[0]:
                    continue
                task, distribution, plan = build(name, config, mesh_text, remat)
                if workload_name == "generate":
                    compiled = compiled_generate_bytes(task, distribution)
                else:
                    compiled = compiled_train_bytes(task, distribution)
                predicted = predicted_bytes(plan, workload_name)
                if args.raw:
                    with open(args.raw, "a") as file:
                        record = dict(
                            name=name,
                            mesh=mesh_text,
                            workload=workload_name,
                            compiled=compiled,
                            config=config,
                        )
                        file.write(json.dumps(record) + "\n")
                ratio = predicted / compiled
                note = ""
                if remat:
                    note = REMAT_NOTE
                else:
                    ratios.append((ratio, name, mesh_text, workload_name))
                rows.append(
                    f"| {name} | {mesh_text} | {workload_name} | "
                    f"{predicted / MIB:.1f} | {compiled / MIB:.1f} | "
                    f"{ratio:.2f} | {note} |"
                )
                print(rows[-1], flush=True)
                keras.backend.clear_session()
    inside = sum(0.85 <= r[0] <= 1.15 for r in ratios)
    lines = [
        "<!-- Generated by `python benchmarks/memory_fit.py --output "
        "benchmarks/memory_fit.md`. -->",
        "",
        f"Per-device MiB, predicted (`estimate_memory`, nothing compiled) "
        f"and compiled (XLA's `memory_analysis()`, 8 fake CPU devices); "
        f"batch {BATCH}, {SEQUENCE} tokens (generation: {PROMPT}-token "
        f"prompt, {SEQUENCE}-token context), float32, AdamW.",
        "",
        "| class | mesh | workload | predicted | compiled | ratio | note |",
        "|---|---|---|---:|---:|---:|---|",
        *rows,
        "",
        f"{inside} of {len(ratios)} train and generate rows within "
        f"0.85-1.15; ratios {min(r[0] for r in ratios):.2f} to "
        f"{max(r[0] for r in ratios):.2f} ({time.time() - started:.0f} s).",
        "",
        "Rows outside: "
        + (
            ", ".join(
                f"{n} {m} {w} ({r:.2f})"
                for r, n, m, w in ratios
                if not 0.85 <= r <= 1.15
            )
            or "none"
        )
        + ".",
        "",
        OUTSIDE_TEXT,
        "",
        REMAT_TEXT,
    ]
    print("\n".join(lines[-1:]))
    if args.output:
        with open(args.output, "w") as file:
            file.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
