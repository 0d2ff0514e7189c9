"""Which mesh, fallback policy and rematerialization for a workload?

`recommend(...)` plans a backbone on every mesh its devices can form
(data x fsdp x model, and x expert for mixtures of experts), under each
fallback policy and, for training, each rematerialization mode; predicts
each candidate's per-device memory (`keras_nlp.distribution.memory`);
drops those that do not fit the device; and ranks the rest by estimated
time per step:

- compute: the matmul FLOPs each device runs (a weight's FLOPs divided
  only by the model-like axes that split it: a weight whole on the model
  axis is computed on every device of it; experts count `top_k` of
  `num_experts`), the attention scores' FLOPs, three passes when training
  and four under `remat="full"`, at the device's peak bf16 FLOP/s;
- communication and memory traffic: the cost model's collectives and HBM
  bytes for the plan (`keras_nlp.distribution.cost.estimate_plan`), with
  the device's bandwidths; generation counts one decoded token (weights
  and cache read once).

Nothing is allocated: plans come from abstract builds. The estimate is a
ranking aid (no overlap of compute and communication is assumed); the
memory model is what decides what fits.
"""

import dataclasses
import itertools
import math

from keras_nlp.distribution.cost import estimate_plan
from keras_nlp.distribution.devices import device_profile
from keras_nlp.distribution.formatting import format_bytes
from keras_nlp.distribution.memory import GENERATE
from keras_nlp.distribution.memory import OPTIMIZERS
from keras_nlp.distribution.memory import batch_shards
from keras_nlp.distribution.memory import block_widths
from keras_nlp.distribution.memory import estimate_memory
from keras_nlp.distribution.memory import experts_per_token
from keras_nlp.distribution.memory import model_like_shards
from keras_nlp.distribution.memory import variable_dtype

POLICIES = ("auto", "memory", "communication")
# Share of a device's memory a plan may take: the rest is left to the
# compiler's scratch, fragmentation and the runtime.
DEFAULT_HEADROOM = 0.9


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """One candidate setup and what it is predicted to cost.

    Attributes:
        mesh: dict of axis name -> size (`data`, `fsdp`, `expert`,
            `model`).
        policy: the fallback policy planned with.
        remat: `"none"` or `"full"` (training).
        memory: the `MemoryEstimate` per device.
        fits: whether `memory.total` is within the usable memory.
        compute_seconds, communication_seconds: the parts of the step.
        step_seconds: their sum.
    """

    mesh: dict
    policy: str
    remat: str
    memory: object
    fits: bool
    compute_seconds: float
    communication_seconds: float

    @property
    def step_seconds(self):
        return self.compute_seconds + self.communication_seconds

    @property
    def mesh_text(self):
        return " x ".join(f"{name} {size}" for name, size in self.mesh.items())

    def why(self, usable_bytes):
        largest, size = self.memory.largest
        return (
            f"{format_bytes(self.memory.total)} per device "
            f"({self.memory.total / usable_bytes:.0%} of the usable "
            f"{format_bytes(usable_bytes)}; largest: "
            f"{largest.replace('_', ' ')} {format_bytes(size)}); step "
            f"~{_seconds(self.step_seconds)}: compute "
            f"{_seconds(self.compute_seconds)}, collectives and memory "
            f"traffic {_seconds(self.communication_seconds)}"
        )

    def to_dict(self):
        return {
            "mesh": dict(self.mesh),
            "policy": self.policy,
            "remat": self.remat,
            "fits": self.fits,
            "step_seconds": self.step_seconds,
            "compute_seconds": self.compute_seconds,
            "communication_seconds": self.communication_seconds,
            "memory": self.memory.to_dict(),
        }


def _seconds(value):
    if value >= 1:
        return f"{value:.2f} s"
    return f"{value * 1e3:.3g} ms"


def candidate_meshes(devices, experts=False):
    """Every `{axis: size}` whose sizes multiply to `devices`.

    Axes are `data`, `fsdp` and `model`, with `expert` before `model` when
    `experts` is true.
    """
    if isinstance(devices, bool) or not isinstance(devices, int):
        devices = None
    if devices is None or devices < 1:
        raise ValueError(
            f"devices must be a positive int. Received: {devices!r}."
        )
    names = ["data", "fsdp", "model"]
    if experts:
        names.insert(2, "expert")
    divisors = [d for d in range(1, devices + 1) if devices % d == 0]
    meshes = []
    for sizes in itertools.product(divisors, repeat=len(names) - 1):
        if devices % math.prod(sizes) == 0:
            last = devices // math.prod(sizes)
            meshes.append(dict(zip(names, (*sizes, last), strict=True)))
    return meshes


def step_flops_per_device(plan, workload, top_k=None):
    """Matmul and attention FLOPs of one step on each device."""
    batch_local = workload.batch_size / batch_shards(plan, workload.batch_size)
    top_k = experts_per_token(plan.config, top_k)
    if workload.mode == GENERATE:
        tokens, keys = batch_local, workload.sequence_length
    else:
        tokens, keys = batch_local * workload.sequence_length, None
    untied = any(w.path.endswith("reverse_embeddings") for w in plan.weights)
    flops = 0.0
    for weight in plan.weights:
        names = weight.dim_names or ()
        lookup = "position" in names or "segment" in names
        if untied and weight.path.endswith("/embeddings"):
            lookup = True  # the output projection is the other table
        if len(weight.shape) < 2 or lookup:
            continue  # norms, biases and lookup tables: no matmul
        params = weight.params / model_like_shards(weight, plan)
        if "experts" in names and top_k:
            params *= top_k / weight.shape[names.index("experts")]
        flops += 2 * tokens * params
    length = keys or workload.sequence_length
    for block in block_widths(plan, top_k):
        # Scores and their weighted sum: two matmuls over every key.
        flops += 4 * tokens * length * block.query_width
    if workload.mode == GENERATE:
        return flops
    passes = 4 if workload.remat == "full" else 3
    return flops * passes


def recommend(
    backbone_cls,
    workload,
    *,
    devices,
    device,
    preset=None,
    config=None,
    memory_bytes=None,
    policies=POLICIES,
    remat_modes=None,
    headroom=DEFAULT_HEADROOM,
    top=5,
):
    """Ranks meshes, policies and remat modes for `workload` on `devices`.

    Args:
        backbone_cls: a backbone class (or `keras_nlp.models.Backbone` with
            a `preset`).
        workload: a `Workload` (its `remat` is replaced by each mode
            tried).
        devices: int, how many devices.
        device: a `DeviceProfile` or its name (`"l4-24gb"`): its memory,
            FLOP/s and bandwidths.
        preset, config: what to plan, as for `plan_layout`.
        memory_bytes: int, overrides the device's memory.
        policies: the fallback policies to try.
        remat_modes: the remat modes to try when training (default both).
        headroom: share of the memory a candidate may use.
        top: how many fitting candidates to return.

    Returns:
        `(best, considered)`: up to `top` fitting `Recommendation`s, the
        fastest first (empty when nothing fits), and every candidate
        considered (`smallest_candidate(considered)` is the one that came
        closest).

    Example:

    ```python
    from keras_nlp.distribution import Workload, recommend
    from keras_nlp.models import Backbone

    best, considered = recommend(
        Backbone,
        Workload("train", batch_size=8, sequence_length=1024),
        devices=8,
        device="l4-24gb",
        preset="gemma_2b_en",
    )
    print(len(best), "of", len(considered), "fit; best:", best[0].mesh)
    ```
    """
    profile = device_profile(device)
    usable = (memory_bytes or profile.memory_bytes) * headroom
    if workload.mode == GENERATE:
        remat_modes = ("none",)
    elif remat_modes is None:
        remat_modes = ("none", "full")
    arguments = {"preset": preset} if preset else {"config": config}
    candidates = [
        _candidate(
            plan,
            dataclasses.replace(workload, remat=remat),
            profile,
            usable,
        )
        for plan in _plans(
            backbone_cls, workload, devices, profile, policies, arguments
        )
        for remat in remat_modes
    ]
    fitting = sorted(
        (c for c in candidates if c.fits), key=lambda c: c.step_seconds
    )
    return fitting[:top], candidates


def _plans(backbone_cls, workload, devices, profile, policies, arguments):
    """One plan per mesh and policy, skipping policies that change nothing."""
    probe = backbone_cls.plan_layout(
        {"model": 1}, data_parallel_dim_name=None, **arguments
    )
    experts = "experts" in {
        name for w in probe.weights for name in (w.dim_names or ())
    }
    seen = set()
    for mesh in candidate_meshes(devices, experts):
        for policy in policies:
            plan = backbone_cls.plan_layout(
                mesh,
                data_parallel_dim_name="data",
                fsdp_dim_name="fsdp",
                expert_parallel_dim_name="expert" if experts else None,
                policy=policy,
                tokens_per_step=workload.tokens,
                lora_rank=workload.lora_rank,
                dtype=variable_dtype(workload.dtype),
                device=profile,
                **arguments,
            )
            key = (tuple(mesh.items()), tuple(w.spec for w in plan.weights))
            if key not in seen:
                seen.add(key)
                yield plan


def _candidate(plan, workload, profile, usable):
    """The `Recommendation` of one plan for one workload."""
    estimate = estimate_memory(plan, workload)
    moments = OPTIMIZERS[workload.optimizer]
    cost = estimate_plan(
        plan,
        profile.cost_model(
            tokens_per_step=workload.tokens,
            training=workload.mode != GENERATE,
            # Adafactor's full-size velocity is one moment's traffic.
            optimizer_moments=1 if moments is None else moments,
        ),
    )
    other = cost.time_us / 1e6
    if workload.mode == GENERATE:
        # Each decoded token reads the whole cache once.
        other += estimate.categories["kv_cache"] / profile.hbm_bandwidth
    return Recommendation(
        mesh=dict(plan.mesh.axis_sizes),
        policy=plan.policy,
        remat=workload.remat,
        memory=estimate,
        fits=estimate.total <= usable,
        compute_seconds=step_flops_per_device(plan, workload)
        / profile.bf16_flops,
        communication_seconds=other,
    )


def smallest_candidate(candidates):
    """The candidate with the least memory per device."""
    return min(candidates, key=lambda c: c.memory.total)
