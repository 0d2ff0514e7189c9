"""Generation speed sharded over one device, and KV cache bytes per device.

Part 1 (measured). One Llama-style decoder, the same weights twice: on one
device with no distribution, and sharded on a (1, 8) mesh of fake CPU
devices under `ModelParallel` with the backbone's `get_layout_map`. Both
`generate` a batch of prompts greedily, side by side in one run (calls
interleaved, medians), after a warm-up call of each shape that compiles
the loop. Prefill is timed as `generate` with 1 new token; one decode step
as the difference to `generate` with N new tokens, over N - 1. Also
reported: the loop's traces per call shape (`generate_traces`), the XLA
compilations of a repeated call, and the time `init_cache` takes.

Part 2 (planned, nothing allocated). For `gemma_2b_en` and `llama3_8b_en`
at 8192 positions in bfloat16, on meshes (1, 2), (1, 8) and (2, 4) and
batch sizes 1 and 8: the KV cache bytes one device holds (the sum over
attentions of `cache_bytes_per_device` of `plan_layout(...).kv_caches`),
over the ideal (total / devices), next to the weights each device holds.
keras-hub gives its cache no layout: XLA propagates one inside its jitted
`generate`. Its column is measured by compiling keras-hub's generate
function on a one-layer config with the preset's head counts on the same
mesh and batch, and reading the cache's per-device shape in the
partitioned while loop; `crash` where keras-hub's layout map (or its input
distribution) cannot be applied.

Run: python benchmarks/generate_decode.py [--repeats 5] [--new-tokens 64]
    [--output benchmarks/generate_decode.md]
"""

import argparse
import contextlib
import math
import os
import re
import statistics
import time

if __name__ == "__main__":
    # Fake devices must be requested before JAX is imported.
    from _sharded_configs import setup_devices

    setup_devices()

# Part 1: a small Llama-style decoder with grouped-query attention; its 8
# key/value heads divide the 8-way model axis.
DECODER = dict(
    vocabulary_size=4096,
    num_layers=4,
    num_query_heads=16,
    num_key_value_heads=8,
    hidden_dim=256,
    intermediate_dim=768,
)
BATCH = 8
PROMPT = 64
MESH = (1, 8)

# Part 2.
PRESETS = ("gemma_2b_en", "llama3_8b_en")
CACHE_MESHES = ((1, 2), (1, 8), (2, 4))
CACHE_BATCHES = (1, 8)
CONTEXT = 8192
DTYPE = "bfloat16"
AXES = ("batch", "model")
MIB = 2**20

# keras-hub's generate is compiled on one-layer configs with the preset's
# head counts (checked against the preset) and a small hidden size.
HUB_PROBES = {
    "llama3_8b_en": (
        "Llama3Backbone",
        dict(
            vocabulary_size=256,
            num_layers=1,
            num_query_heads=32,
            num_key_value_heads=8,
            hidden_dim=256,
            intermediate_dim=256,
        ),
    ),
}
HUB_PROMPT = 24
HUB_LENGTH = 40

# JAX's monitoring events: one per XLA compilation, one per trace.
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"


# === Part 1: decode speed ===


@contextlib.contextmanager
def count_events(name=COMPILE_EVENT):
    """Counts JAX monitoring events `name` while active (XLA compilations
    by default); yields a one-item list."""
    import jax

    count = [0]

    def listener(event, duration, **kwargs):
        if event == name:
            count[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield count
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


class Generator:
    """A causal LM and the distribution it runs under (or none)."""

    def __init__(self, causal_lm, distribution=None):
        self.causal_lm = causal_lm
        self.distribution = distribution

    def _scope(self):
        if self.distribution is None:
            return contextlib.nullcontext()
        return self.distribution.scope()

    def generate(self, prompts, new_tokens):
        """`(seconds, token_ids, traces, compilations)` of one call."""
        traces = self.causal_lm.generate_traces
        with self._scope(), count_events() as compilations:
            start = time.perf_counter()
            outputs = self.causal_lm.generate(
                prompts, max_new_tokens=new_tokens, stop_token_ids=None
            )
            seconds = time.perf_counter() - start
        return (
            seconds,
            outputs["token_ids"],
            self.causal_lm.generate_traces - traces,
            compilations[0],
        )

    def allocate(self, length):
        """Seconds `init_cache` takes for the benchmark's batch."""
        import jax

        with self._scope():
            start = time.perf_counter()
            caches = self.causal_lm.init_cache(BATCH, length)
            jax.block_until_ready(caches)
            return time.perf_counter() - start


def build_generators():
    """The decoder on one device and on `MESH`, with the same weights."""
    import keras

    import keras_nlp

    keras.utils.set_random_seed(0)
    single = keras_nlp.models.LlamaBackbone(**DECODER)
    devices = keras.distribution.list_devices()
    mesh = keras.distribution.DeviceMesh(MESH, AXES, devices[: math.prod(MESH)])
    layout_map = keras_nlp.models.LlamaBackbone.get_layout_map(mesh)
    distribution = keras_nlp.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    with distribution.scope():
        sharded = keras_nlp.models.LlamaBackbone(**DECODER)
        for target, source in zip(sharded.weights, single.weights, strict=True):
            if target.path != source.path:
                raise AssertionError(f"{target.path} != {source.path}")
            target.assign(source.numpy())
        sharded_lm = keras_nlp.models.LlamaCausalLM(sharded)
    return {
        "1 device": Generator(keras_nlp.models.LlamaCausalLM(single)),
        "x".join(map(str, MESH)): Generator(sharded_lm, distribution),
    }


def decode_rates(prefill_seconds, generate_seconds, new_tokens, batch):
    """Splits two `generate` times into prefill and decode.

    Args:
        prefill_seconds: a call generating 1 new token: the prompts' pass
            (prefill) and the first token's sampling.
        generate_seconds: a call generating `new_tokens` tokens, which adds
            `new_tokens - 1` decode steps.
        new_tokens: int > 1.
        batch: rows generated per step.

    Returns:
        dict: `step_ms` (one decode step), `decode_tokens_per_s` (batch
        over a step), `end_to_end_tokens_per_s` (all new tokens over the
        whole call) and `prefill_steps` (the prefill in decode steps).
        All but the end-to-end rate are NaN when the longer call took no
        longer than the shorter (timing noise).
    """
    if new_tokens < 2:
        raise ValueError(f"new_tokens must be > 1. Received: {new_tokens}.")
    step = (generate_seconds - prefill_seconds) / (new_tokens - 1)
    if step <= 0:
        # Noise larger than the decode steps: nothing to split.
        step = float("nan")
    return {
        "step_ms": step * 1e3,
        "decode_tokens_per_s": batch / step,
        "end_to_end_tokens_per_s": batch * new_tokens / generate_seconds,
        "prefill_steps": prefill_seconds / step,
    }


def measure_generation(generators, new_tokens, repeats):
    """Times every generator, interleaved, for 1 and `new_tokens` tokens.

    Returns:
        `(results, equal)`: per generator name a dict of medians and
        counts; `equal` the share of generated tokens the sharded run has
        in common with the single-device one.
    """
    import numpy as np

    rng = np.random.default_rng(0)
    prompts = rng.integers(
        1, DECODER["vocabulary_size"], (BATCH, PROMPT)
    ).astype("int32")
    results = {name: {} for name in generators}
    outputs = {}
    for count in (1, new_tokens):
        # The first call of a shape traces and compiles the loop.
        for name, generator in generators.items():
            seconds, _, traces, _ = generator.generate(prompts, count)
            results[name][f"warmup_s_{count}"] = seconds
            results[name][f"first_traces_{count}"] = traces
        times = {name: [] for name in generators}
        traces = {name: 0 for name in generators}
        compilations = {name: [] for name in generators}
        allocations = {name: [] for name in generators}
        for _ in range(repeats):
            for name, generator in generators.items():
                seconds, tokens, traced, compiled = generator.generate(
                    prompts, count
                )
                times[name].append(seconds)
                traces[name] += traced
                compilations[name].append(compiled)
                outputs[name, count] = tokens
                allocations[name].append(generator.allocate(PROMPT + count))
        for name in generators:
            results[name][f"ms_{count}"] = statistics.median(times[name]) * 1e3
            results[name][f"repeat_traces_{count}"] = traces[name]
            results[name][f"compilations_{count}"] = max(compilations[name])
            results[name][f"allocate_ms_{count}"] = (
                statistics.median(allocations[name]) * 1e3
            )
    for name in generators:
        results[name].update(
            decode_rates(
                results[name]["ms_1"] / 1e3,
                results[name][f"ms_{new_tokens}"] / 1e3,
                new_tokens,
                BATCH,
            )
        )
    first, *others = generators
    generated = slice(PROMPT, PROMPT + new_tokens)
    equal = {
        name: float(
            np.mean(
                outputs[name, new_tokens][:, generated]
                == outputs[first, new_tokens][:, generated]
            )
        )
        for name in others
    }
    return results, equal


def render_generation(results, equal, new_tokens, repeats):
    single, sharded = results
    a, b = results[single], results[sharded]
    n = new_tokens
    ratio_header = f"{sharded} / {single}"

    def row(label, key, digits=1):
        ratio = b[key] / a[key] if a[key] else float("nan")
        return (
            f"| {label} | {a[key]:.{digits}f} | {b[key]:.{digits}f} | "
            f"{ratio:.2f} |"
        )

    def pair(key_1, key_n):
        return f"{a[key_1]} / {a[key_n]} | {b[key_1]} / {b[key_n]} | - |"

    for result in (a, b):
        result["prefill_loop_ms"] = result["ms_1"] - result["allocate_ms_1"]
    lines = [
        f"Llama-style decoder: {DECODER['num_layers']} layers, hidden "
        f"{DECODER['hidden_dim']}, {DECODER['num_query_heads']} query / "
        f"{DECODER['num_key_value_heads']} key-value heads, MLP "
        f"{DECODER['intermediate_dim']}, vocabulary "
        f"{DECODER['vocabulary_size']}, float32, the same weights on both. "
        f"Greedy `generate` of batch {BATCH}, prompts of {PROMPT} tokens; "
        f"medians of {repeats} calls per shape, the two models' calls "
        "interleaved, after one warm-up call per shape (its compile time "
        "is excluded, and listed at the end).",
        "",
        f"| | {single} | {sharded} | {ratio_header} |",
        "|---|---:|---:|---:|",
        row("prefill: `generate`, 1 new token (ms)", "ms_1"),
        row("&nbsp;&nbsp;of which `init_cache` (ms)", "allocate_ms_1"),
        row("&nbsp;&nbsp;prefill without `init_cache` (ms)", "prefill_loop_ms"),
        row(f"`generate`, {n} new tokens (ms)", f"ms_{n}"),
        row(f"decode step: (ms_{n} - ms_1) / {n - 1} (ms)", "step_ms", 2),
        row(
            f"**decode tokens/s** (batch {BATCH} / step)", "decode_tokens_per_s"
        ),
        row(
            f"end-to-end tokens/s ({BATCH} x {n} / ms_{n})",
            "end_to_end_tokens_per_s",
        ),
        row("prefill / one decode step", "prefill_steps"),
        f"| loop traces, first call of a shape (1 / {n} new) | "
        + pair("first_traces_1", f"first_traces_{n}"),
        f"| loop traces, {repeats} repeated calls (1 / {n} new) | "
        + pair("repeat_traces_1", f"repeat_traces_{n}"),
        f"| XLA compilations in a repeated call (1 / {n} new) | "
        + pair("compilations_1", f"compilations_{n}"),
        f"| first call of a shape, with compiling (s) (1 / {n} new) | "
        f"{a['warmup_s_1']:.1f} / {a[f'warmup_s_{n}']:.1f} | "
        f"{b['warmup_s_1']:.1f} / {b[f'warmup_s_{n}']:.1f} | - |",
    ]
    lines.append(
        f"| generated tokens equal to {single}'s | - | "
        f"{equal[sharded]:.1%} | - |"
    )
    return lines


def generation_notes(results, new_tokens):
    """What part 1's numbers mean, with the measured values."""
    single, sharded = results
    a, b = results[single], results[sharded]
    ratio = b["decode_tokens_per_s"] / a["decode_tokens_per_s"]
    return [
        "",
        f"- **Decode tokens/s, {sharded} over {single}: {ratio:.2f}.** "
        "The 8 devices are XLA CPU devices of one process on the host's "
        f"{os.cpu_count()} cores (shared with other work while this ran): "
        "sharding divides each matmul 8 ways, but all 8 shards run on the "
        "same cores, so at best it spreads a step over cores a single "
        "device's program may already use. What it surely adds: per block "
        "and step, the all-reduces of the attention output and MLP down "
        "projections, and 8 programs to launch and synchronize over "
        f"matmuls of {BATCH} rows, where per-op overhead dominates. On "
        "accelerators a decode step is bound by reading the weights and "
        "the cache from memory, which sharding divides per device; this "
        "run cannot show that, only the partitioning overhead.",
        f"- **`init_cache` under the distribution: {b['allocate_ms_1']:.0f} "
        f"ms per call** ({b['allocate_ms_1'] / b['ms_1']:.0%} of the "
        f"sharded 1-token call; {a['allocate_ms_1']:.1f} ms on one "
        "device). `allocate_caches` "
        "(`keras_nlp/distribution/array_placement.py`) creates each cache in "
        "its shards (`jnp.zeros(..., device=sharding)`), compiling "
        f"nothing: {b[f'compilations_{new_tokens}']} XLA compilations in "
        "a repeated sharded call (it compiled one program per attention "
        "on every call before; 865 ms here). The generation loop itself "
        "is traced once per (batch, prompt length, total length) and "
        "reused (`generate_traces`).",
        f"- **Prefill vs decode:** the prefill of {BATCH} x {PROMPT} "
        f"prompt tokens costs {a['prefill_steps']:.1f} decode steps on one "
        f"device and {b['prefill_steps']:.1f} sharded (with `init_cache`). "
        "Prefill is timed as a 1-token call, whose cache has "
        f"{PROMPT + 1} slots; the {new_tokens}-token call's prefill "
        f"attends over {PROMPT + new_tokens} slots, so the decode step is "
        "overestimated by that difference over "
        f"{new_tokens - 1} steps (small here: attention is a small share).",
        "- Wall times on a shared 2-core machine are noisy: the calls are "
        "interleaved so both models see the same load, and medians are "
        "reported; compare ratios, not absolute times.",
    ]


# === Part 2: KV cache bytes ===


def cache_rows(preset, mesh_shape, batches, context=CONTEXT, dtype=DTYPE):
    """Our planned KV cache bytes per device for one preset and mesh.

    Args:
        preset: a built-in preset name.
        mesh_shape: `(batch, model)` axis sizes.
        batches: batch sizes.
        context: positions per cache.
        dtype: the cache's dtype (and the weights', for their bytes).

    Returns:
        One dict per batch size: `per_device`, `ideal`, `total` (bytes,
        summed over attentions), `ratio`, `weights_per_device` (bytes),
        `caches` (count) and `why`.
    """
    from keras_nlp.distribution.kv_cache import cache_bytes_per_device
    from keras_nlp.distribution.kv_cache import cache_spec
    from keras_nlp.distribution.layout_plan import dtype_itemsize
    from keras_nlp.models import Backbone

    sizes = dict(zip(AXES, mesh_shape, strict=True))
    devices = math.prod(mesh_shape)
    plan = Backbone.plan_layout(sizes, preset=preset, dtype=dtype)
    if not plan.kv_caches:
        raise ValueError(f"{preset} plans no KV caches.")
    itemsize = dtype_itemsize(dtype)
    rows = []
    for batch in batches:
        per_device = ideal = 0
        for cache in plan.kv_caches:
            shard, even = cache_bytes_per_device(
                cache, batch, context, sizes, ("batch",), itemsize
            )
            per_device += shard
            ideal += even
        specs = {
            cache_spec(cache, batch, sizes, ("batch",), context)
            for cache in plan.kv_caches
        }
        rows.append(
            dict(
                per_device=per_device,
                ideal=ideal,
                total=ideal * devices,
                ratio=per_device / ideal,
                weights_per_device=plan.bytes_per_device,
                caches=len(plan.kv_caches),
                why=_why(plan.kv_caches[0], specs, batch, sizes),
            )
        )
    return rows


def _why(cache, specs, batch, sizes):
    """Why a cache's shard is what it is, in a few words."""
    if len(specs) != 1:
        return f"attentions laid out differently: {sorted(map(str, specs))}"
    spec = specs.pop()
    heads = f"{cache.kv_heads} KV head" + ("s" if cache.kv_heads > 1 else "")
    if spec[3]:
        text = f"{heads} over '{spec[3]}' ({sizes[spec[3]]})"
    elif spec[2]:
        text = (
            f"{heads}, whole on 'model' as the key kernel's; the length "
            f"over '{spec[2]}' ({sizes[spec[2]]})"
        )
    else:
        text = (
            f"{heads}, whole on 'model' ({sizes['model']}) as the key kernel's"
        )
    if sizes["batch"] > 1:
        if spec[0]:
            text += f"; batch {batch} over 'batch' ({sizes['batch']})"
        else:
            text += (
                f"; batch {batch} not divisible by 'batch' "
                f"({sizes['batch']}): whole"
            )
    return text


def cache_shards_in_while(hlo_text, layers, length):
    """Per-device shapes of keras-hub's cache in a partitioned HLO module.

    keras-hub keeps one cache `(batch, layers, 2, length, kv_heads,
    head_dim)` in its generation while loop; after SPMD partitioning the
    loop's state holds each device's shard.

    Returns:
        A set of shape tuples found in the result types of `while` ops.
    """
    pattern = re.compile(
        rf"\b[a-z0-9]+\[(\d+),{layers},2,{length},(\d+),(\d+)\]"
    )
    shapes = set()
    for line in hlo_text.splitlines():
        head, found, _ = line.partition(" while(")
        if not found:
            continue
        for batch, heads, head_dim in pattern.findall(head):
            shapes.add(
                (int(batch), layers, 2, length, int(heads), int(head_dim))
            )
    return shapes


def keras_hub_cache_ratio(preset, mesh_shape, batch):
    """keras-hub's KV cache per device over the ideal, measured.

    Compiles keras-hub's generate function for `HUB_PROBES[preset]` under
    `keras.distribution.ModelParallel` with keras-hub's layout map, the
    inputs distributed as keras-hub's `generate` distributes them.

    Returns:
        `(ratio, None)`, or `(None, why)` when keras-hub fails.
    """
    import keras
    import keras_hub
    import numpy as np

    from keras_nlp.models import Backbone

    class_name, config = HUB_PROBES[preset]
    _, preset_config = Backbone._preset_config(preset)
    for key in ("num_query_heads", "num_key_value_heads"):
        if config[key] != preset_config[key]:
            raise AssertionError(
                f"{preset}'s probe has {key}={config[key]}, the preset "
                f"{preset_config[key]}"
            )
    devices = keras.distribution.list_devices()
    mesh = keras.distribution.DeviceMesh(
        mesh_shape, AXES, devices[: math.prod(mesh_shape)]
    )
    hub_class = getattr(keras_hub.models, class_name)
    layout_map = hub_class.get_layout_map(mesh)
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )
    task_class = getattr(
        keras_hub.models, class_name.replace("Backbone", "CausalLM")
    )
    mask = np.zeros((batch, HUB_LENGTH), bool)
    mask[:, :HUB_PROMPT] = True
    inputs = {
        "token_ids": np.ones((batch, HUB_LENGTH), "int32"),
        "padding_mask": mask,
    }
    with distribution.scope():
        backbone = hub_class(**config)
        causal_lm = task_class(backbone=backbone, preprocessor=None)
        wrapper = causal_lm.make_generate_function()
        # The jitted function inside keras-hub's wrapper.
        (compiled,) = [
            cell.cell_contents
            for cell in wrapper.__closure__
            if getattr(cell.cell_contents, "__name__", "")
            == "compiled_generate_function"
        ]
        state = tuple(
            [v.value for v in variables]
            for variables in (
                causal_lm.sampler.variables,
                causal_lm.trainable_variables,
                causal_lm.non_trainable_variables,
            )
        )
        try:
            # As keras-hub's `generate` distributes its inputs.
            inputs = {
                key: keras.distribution.distribute_tensor(
                    keras.ops.convert_to_tensor(value),
                    distribution.get_data_layout(value.shape),
                )
                for key, value in inputs.items()
            }
            text = compiled.lower(inputs, None, state).compile().as_text()
        except ValueError as error:
            first = str(error).splitlines()[0]
            return None, f"{type(error).__name__}: {first}"
    shapes = cache_shards_in_while(text, config["num_layers"], HUB_LENGTH)
    if len(shapes) != 1:
        raise AssertionError(f"Expected one cache shape, found {shapes}")
    (shard,) = shapes
    head_dim = config["hidden_dim"] // config["num_query_heads"]
    whole = (batch, config["num_layers"], 2, HUB_LENGTH)
    whole += (config["num_key_value_heads"], head_dim)
    ratio = math.prod(shard) / (math.prod(whole) / math.prod(mesh_shape))
    return ratio, None


def keras_hub_cells(preset, mesh_shape, batches, footnotes):
    """keras-hub's column for one preset and mesh: one cell per batch."""
    import memory

    from keras_nlp.distribution import MeshShape
    from keras_nlp.distribution.backbone_planner import backbone_variables
    from keras_nlp.models import Backbone

    owner, config = Backbone._preset_config(preset)
    mesh = MeshShape(mesh_shape, AXES)
    hub, _ = memory.keras_hub_memory(
        owner.__name__, backbone_variables(owner, config), mesh, {}
    )
    if hub.status != memory.OK:
        text = "crash" if hub.status == memory.CRASH else "no layout map"
        note = f"keras-hub's layout map: {hub.failure or hub.status}"
        return [text + footnotes.ref(note) for _ in batches]
    if preset not in HUB_PROBES:
        return ["not measured" for _ in batches]
    cells = []
    for batch in batches:
        ratio, failure = keras_hub_cache_ratio(preset, mesh_shape, batch)
        if failure:
            cells.append("crash" + footnotes.ref(f"keras-hub: {failure}"))
        else:
            cells.append(f"{ratio:.2f}")
    return cells


def render_caches(rows, footnotes):
    lines = [
        f"KV caches at {CONTEXT} positions in {DTYPE}, summed over "
        "attentions, from `plan_layout` (nothing allocated). Ideal: the "
        "whole cache over the number of devices. Weights: the plan's "
        f"parameter bytes per device in {DTYPE}. keras-hub: measured on a "
        "one-layer config with the preset's head counts (see the legend).",
        "",
        "| preset | mesh | batch | KV cache total (MiB) | per device, ours "
        "(MiB) | ideal (MiB) | ours / ideal | keras-hub / ideal | weights "
        "per device (MiB) | cache / weights per device | why (ours) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for preset, mesh_shape, batch, row, hub in rows:
        lines.append(
            f"| {preset} | {'x'.join(map(str, mesh_shape))} | {batch} | "
            f"{row['total'] / MIB:,.0f} | {row['per_device'] / MIB:,.0f} | "
            f"{row['ideal'] / MIB:,.1f} | {row['ratio']:.2f} | {hub} | "
            f"{row['weights_per_device'] / MIB:,.0f} | "
            f"{row['per_device'] / row['weights_per_device']:.2f} | "
            f"{row['why']} |"
        )
    if footnotes.texts:
        lines += [""] + footnotes.lines()
    return lines


CACHE_NOTES = """\
- Ours: a cache takes the layout of its attention's key kernel, plus the
  batch on 'batch' when it divides. Gemma 2B has 1 KV head: its key kernel
  cannot split on 'model', so the cache's length is split there instead
  (issue 35; before, the cache was whole on 'model': 2.00, 8.00 and 4.00
  on these meshes, 8.00 for a batch of 1 on 2x4): 1.00, except a batch of
  1 on 2x4 (2.00: the batch is whole on both 'batch' devices). Llama 3
  8B's 8 KV heads divide every model axis here: 1.00, the same exception.
- keras-hub allocates its cache inside its jitted `generate` with no
  layout, so XLA's sharding propagation places it. Measured, not assumed:
  on Llama 3 8B's head counts XLA put the 8 KV heads on 'model' on 1x2 and
  1x8 (1.00, the same as ours); on 2x4, batch 8, the cache kept the whole
  batch on every device and its heads split over 'batch' only (4.00,
  keras-hub's key kernel has its heads on 'batch'); a batch of 1 on 2x4
  fails when keras-hub splits its inputs over 'batch'. A cache held whole
  on every device (no layout and no propagation) would be at the number
  of devices (2, 8, 8). On Gemma 2B keras-hub's layout map cannot be
  applied on any of these meshes (its key kernel's single head is split
  over 'model'), so it cannot generate sharded at all.
- At 8k context the cache is no longer small next to the weights: Gemma
  2B, batch 8 on 1x8 held more cache than weights per device while its
  single head was whole there; Llama 3 8B, batch 8, about half as much.
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument(
        "--skip-generation", action="store_true", help="Part 2 only"
    )
    parser.add_argument("--output", help="also write the tables to this file")
    args = parser.parse_args()

    start = time.perf_counter()
    lines = []
    if not args.skip_generation:
        generators = build_generators()
        results, equal = measure_generation(
            generators, args.new_tokens, args.repeats
        )
        lines += ["## Part 1: decode speed, sharded over one device", ""]
        lines += render_generation(
            results, equal, args.new_tokens, args.repeats
        )
        lines += generation_notes(results, args.new_tokens)
        print("\n".join(lines), flush=True)
        lines.append("")
    generation_seconds = time.perf_counter() - start

    import memory

    footnotes = memory.Footnotes()
    rows = []
    for preset in PRESETS:
        for mesh_shape in CACHE_MESHES:
            ours = cache_rows(preset, mesh_shape, CACHE_BATCHES)
            hub = keras_hub_cells(preset, mesh_shape, CACHE_BATCHES, footnotes)
            for batch, row, cell in zip(CACHE_BATCHES, ours, hub, strict=True):
                rows.append((preset, mesh_shape, batch, row, cell))
                print(rows[-1][:3], f"{row['ratio']:.2f}", cell, flush=True)
    lines += ["## Part 2: KV cache bytes per device over the ideal", ""]
    lines += render_caches(rows, footnotes)
    lines += ["", CACHE_NOTES.rstrip()]
    elapsed = time.perf_counter() - start
    lines += [
        "",
        f"Measured in {elapsed:.0f} s (part 1: {generation_seconds:.0f} s).",
    ]
    table = "\n".join(lines)
    print()
    print(table)
    if args.output:
        with open(args.output, "w") as file:
            file.write(table + "\n")


if __name__ == "__main__":
    main()
