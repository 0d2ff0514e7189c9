"""What a weight's placement costs: bytes per device and collective bytes.

When a mesh axis does not divide the dimension a rule puts it on, the
resolver has candidates: keep the weight replicated along the axis, or put
the axis on another dimension the rule gives a role to and that it divides
(heads and head_dim are never split). This module scores each candidate with
a small, explicit model, so a policy can choose (see `resolve_layout`).

The model, per weight of shape `shape` laid out as `spec` (`b` = bytes per
element, `S` = bytes of one device's shard, `t` = tokens per device =
`tokens_per_step` / the sizes of the axes that split the batch):

Per-device bytes (`state_bytes`): the shard, plus, when training, its
gradient and `optimizer_moments` moments (Adam: 2), all in the variable's
dtype: `S * (2 + moments)`; `S` when not training. Bytes touched in HBM
per step (`touched_bytes`): forward reads the weight, backward reads it
and writes its gradient, the optimizer reads weight, gradient and moments
and writes weight and moments: `S * (6 + 2 * moments)` (10 S for Adam);
`S` when not training.

Collective bytes, counted like `benchmarks/collectives.py` counts them in
compiled HLO (an all-reduce or all-gather by its full result, a
reduce-scatter by its piece), forward plus backward when training. A
kernel's dimensions are its inputs (contracted with the activations) and
its outputs: `hidden`, the residual stream, is the output where it is the
last dimension (an attention output or down projection) and the input
elsewhere; without `hidden`, the first dimension is the input (Keras's
`Dense`), and without any names it is taken to be the residual stream.
`in` and `out` are the activation bytes per token on each side (`b`
times the product of those dimensions, divided by the other model-like
axes sharding them). For each mesh axis `a` of size > 1:

- `a` shards weights FSDP-style (the `DATA` role's axes) and is on a
  dimension: all-gather of the weight forward and again backward
  (`S * size(a)` each), reduce-scatter of its gradient (`S`).
- `a` splits the batch (the data or fsdp axis) and is not on the weight:
  all-reduce of its gradient over `a` (`S`).
- `a` is a model or expert axis:
  - on an input dimension: all-reduce of the output forward (`t * out`);
    backward, when that input is the residual stream (so the activation
    arrives whole along `a`), all-gather of the input gradient
    (`t * in`). Lookup tables (`vocab`, `position`, `segment` inputs)
    have no input gradient.
  - on an output dimension: all-gather of the output forward when it is
    the residual stream; all-reduce of the input gradient backward
    (`t * in`), as a column-parallel kernel's.
  - on no dimension (replicated along `a`): if another weight of its layer
    is sharded along `a` (its neighbours are), the weight's computation is
    repeated on every device and its output gradient arrives as a partial
    sum: backward all-reduce of the gradient, the smaller of `t * out` and
    `S`. If no weight of its layer is (GPT-2's 12 heads on an 8-way axis),
    nothing: the plan's activation layouts (see `activations`) keep the
    layer's input and output whole along `a`, so every device repeats its
    work. (Without them XLA splits such a layer by tokens and all-gathers
    its output and input gradient, as `benchmarks/collectives.py`'s
    "before" rows measure.)

Weights of rank 1 (norm scales, biases) only get the batch-axis terms.
The model ignores compute (replicated work, above, is repeated), the
tied output projection of an embedding, and attention's own activations.

The scalar a policy compares, `time`: link bytes (a ring all-reduce sends
its bytes twice, so all-reduces count double) over the per-device link
bandwidth, plus touched bytes over the HBM bandwidth, in microseconds.
The defaults are an H100-class device: 3.2 TB/s of HBM, 400 GB/s of
NVLink per direction, a ratio of 8.

Example:

```python
from keras_nlp.distribution.cost import CostModel
from keras_nlp.distribution.cost import estimate

estimate(
    shape=(64, 2, 8),
    dtype="float32",
    spec=("model", None, None),
    dim_names=("hidden", "kv_heads", "head_dim"),
    axis_sizes={"batch": 1, "model": 8},
    batch_axes=("batch",),
    model=CostModel(tokens_per_step=4),
).collectives
# {'all-reduce': 256, 'all-gather': 1024}
```
"""

import dataclasses
import math

from keras_nlp.distribution.rules import entry_axes

# A kernel dimension that carries the residual stream.
RESIDUAL_DIMS = ("hidden",)
# Input dimensions of lookup tables: the inputs are ids, with no gradient.
LOOKUP_DIMS = ("vocab", "position", "segment", "buckets")
# Dimensions an axis is never moved onto: a head is never split.
UNSPLIT_DIMS = ("head_dim", "qkv_head_dim")
# Link bytes per byte of each collective's result (ring algorithms).
LINK_FACTOR = {"all-reduce": 2}
# Default tokens per step: 8 sequences of 2048 tokens, a fine-tuning batch.
DEFAULT_TOKENS_PER_STEP = 8 * 2048


def layer_of(path):
    """The layer a weight belongs to: its path without the last two parts."""
    return path.rsplit("/", 2)[0] if path.count("/") >= 2 else ""


def check_tokens_per_step(tokens_per_step):
    """Raises a `ValueError` unless `tokens_per_step` is a positive int."""
    if (
        isinstance(tokens_per_step, bool)
        or not isinstance(tokens_per_step, int)
        or tokens_per_step < 1
    ):
        raise ValueError(
            "tokens_per_step must be a positive int: the tokens of one "
            f"training step over all devices (default "
            f"{DEFAULT_TOKENS_PER_STEP}). Received: "
            f"tokens_per_step={tokens_per_step!r}."
        )
    return tokens_per_step


@dataclasses.dataclass(frozen=True)
class CostModel:
    """The assumptions a placement is scored under.

    Attributes:
        tokens_per_step: int, tokens of one step over all devices.
        training: bool. If `False`, only the weights and the forward pass.
        optimizer_moments: int, optimizer states per weight, in the
            weight's dtype (Adam: 2, SGD with momentum: 1).
        link_bandwidth: bytes/s a device sends to the others per direction.
        hbm_bandwidth: bytes/s of a device's memory.
    """

    tokens_per_step: int = DEFAULT_TOKENS_PER_STEP
    training: bool = True
    optimizer_moments: int = 2
    link_bandwidth: float = 400e9
    hbm_bandwidth: float = 3.2e12

    def __post_init__(self):
        check_tokens_per_step(self.tokens_per_step)
        for name in ("link_bandwidth", "hbm_bandwidth"):
            if not getattr(self, name) > 0:
                raise ValueError(
                    f"{name} must be > 0 bytes/s. Received: "
                    f"{name}={getattr(self, name)!r}."
                )

    def state_factor(self):
        """Per-device bytes per byte of a weight's shard."""
        return 2 + self.optimizer_moments if self.training else 1

    def touched_factor(self):
        """HBM bytes touched per step per byte of a weight's shard."""
        return 6 + 2 * self.optimizer_moments if self.training else 1

    def time_us(self, collectives, touched_bytes):
        """Estimated microseconds of a step spent on these bytes."""
        link = sum(
            LINK_FACTOR.get(kind, 1) * count
            for kind, count in collectives.items()
        )
        seconds = link / self.link_bandwidth
        return 1e6 * (seconds + touched_bytes / self.hbm_bandwidth)


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What one placement of one weight is estimated to cost per step.

    Attributes:
        spec: the placement.
        label: the candidate in words, e.g. `"replicate along 'model'"`.
        state_bytes: per-device bytes (shard, gradient, optimizer state).
        touched_bytes: HBM bytes read and written per step.
        collectives: dict collective kind -> bytes per device per step.
        time_us: the scalar `CostModel.time_us` of the two.
        chosen: bool, whether the policy picked this candidate.
    """

    spec: tuple
    label: str
    state_bytes: int
    touched_bytes: int
    collectives: dict
    time_us: float
    chosen: bool = False

    @property
    def collective_bytes(self):
        return sum(self.collectives.values())

    def short(self):
        return (
            f"{self.label}: {self.time_us:.3g} us, "
            f"{_mb(self.state_bytes)} MB/device, "
            f"{_mb(self.collective_bytes)} MB collectives"
        )

    def to_dict(self):
        from keras_nlp.distribution.layout_plan import spec_to_json

        return {
            "spec": spec_to_json(self.spec),
            "label": self.label,
            "state_bytes": self.state_bytes,
            "touched_bytes": self.touched_bytes,
            "collectives": dict(self.collectives),
            "collective_bytes": self.collective_bytes,
            "time_us": self.time_us,
            "chosen": self.chosen,
        }


def _mb(count):
    return f"{count / 1e6:.3g}"


def kernel_sides(shape, dim_names):
    """`(input dims, output dims)`: the indices contracted or produced.

    `hidden` is the output where it is the last dimension and the input
    elsewhere; without it (or without names) the first dimension is the
    input.
    """
    rank = len(shape)
    names = dim_names or (None,) * rank
    hidden = [d for d, name in enumerate(names) if name in RESIDUAL_DIMS]
    if hidden and hidden[-1] == rank - 1:
        inputs = tuple(range(rank - 1))
    elif hidden:
        inputs = tuple(hidden)
    else:
        inputs = (0,)
    outputs = tuple(d for d in range(rank) if d not in inputs)
    return inputs, outputs


def estimate(
    shape,
    dtype,
    spec,
    dim_names,
    axis_sizes,
    batch_axes,
    model,
    sharded_neighbours=(),
    label=None,
    fsdp_axes=None,
):
    """The `Estimate` of laying out one weight as `spec`.

    Args:
        shape: the weight's shape.
        dtype: its dtype name.
        spec: one mesh-axis entry per dimension.
        dim_names: what each dimension is, or `None`.
        axis_sizes: dict mesh axis -> size.
        batch_axes: the mesh axes that split the batch (data, fsdp).
        model: a `CostModel`.
        sharded_neighbours: mesh axes that shard other weights of the same
            layer.
        label: the candidate in words; defaults to the spec.
        fsdp_axes: the mesh axes that shard weights FSDP-style (gathered
            before use); defaults to `batch_axes`.

    Returns:
        An `Estimate`.
    """
    from keras_nlp.distribution.layout_plan import dtype_itemsize
    from keras_nlp.distribution.rules import format_spec

    itemsize = dtype_itemsize(dtype)
    sizes = [
        math.prod(axis_sizes[a] for a in entry_axes(entry)) for entry in spec
    ]
    shard = math.prod(d // s for d, s in zip(shape, sizes, strict=True))
    shard_bytes = shard * itemsize
    batch_axes = tuple(a for a in batch_axes if a in axis_sizes)
    fsdp_axes = batch_axes if fsdp_axes is None else tuple(fsdp_axes)
    batch = math.prod(axis_sizes[a] for a in batch_axes)
    tokens = model.tokens_per_step / batch
    training = model.training
    collectives = {}

    def add(kind, count):
        collectives[kind] = collectives.get(kind, 0) + int(round(count))

    inputs, outputs = kernel_sides(shape, dim_names)
    # Without names, the input is taken to be the residual stream.
    names = dim_names or ("hidden",) + (None,) * (len(shape) - 1)
    ids_input = any(names[d] in LOOKUP_DIMS for d in inputs)
    for axis, size in axis_sizes.items():
        if size == 1:
            continue
        dims = [d for d, entry in enumerate(spec) if axis in entry_axes(entry)]
        if axis in fsdp_axes and dims:
            add("all-gather", shard_bytes * size * (2 if training else 1))
            if training:
                add("reduce-scatter", shard_bytes)
            continue
        if axis in batch_axes:
            if training:
                add("all-reduce", shard_bytes)
            continue
        if len(shape) < 2:
            continue

        def side_bytes(side, axis=axis):
            # Activation bytes per token, split by the other model axes.
            split = math.prod(
                axis_sizes[a]
                for d in side
                for a in entry_axes(spec[d])
                if a != axis and a not in fsdp_axes
            )
            return tokens * itemsize * math.prod(shape[d] for d in side) / split

        out_bytes, in_bytes = side_bytes(outputs), side_bytes(inputs)
        backward_input = training and not ids_input
        if any(d in inputs for d in dims):
            add("all-reduce", out_bytes)
            residual = any(names[d] in RESIDUAL_DIMS for d in dims)
            if backward_input and residual:
                add("all-gather", in_bytes)
        elif dims:
            if any(names[d] in RESIDUAL_DIMS for d in dims):
                add("all-gather", out_bytes)
            if backward_input:
                add("all-reduce", in_bytes)
        elif axis in sharded_neighbours:
            if training:
                add("all-reduce", min(out_bytes, shard_bytes))
        # Else the whole layer is replicated along `a`: the plan's
        # activation layouts keep its input and output whole there, so
        # every device repeats its work and nothing crosses `a`.
    collectives = {kind: count for kind, count in collectives.items() if count}
    touched = shard_bytes * model.touched_factor()
    return Estimate(
        spec=tuple(spec),
        label=label or format_spec(spec),
        state_bytes=shard_bytes * model.state_factor(),
        touched_bytes=touched,
        collectives=collectives,
        time_us=model.time_us(collectives, touched),
    )


# What each policy minimizes, in order (ties broken by the next key, then
# by the candidate's position: replication first).
POLICY_KEYS = {
    "auto": lambda e: (e.time_us, e.state_bytes),
    "memory": lambda e: (e.state_bytes, _link_bytes(e)),
    "communication": lambda e: (_link_bytes(e), e.state_bytes),
}


def _link_bytes(estimate):
    return sum(
        LINK_FACTOR.get(kind, 1) * count
        for kind, count in estimate.collectives.items()
    )


def choose(estimates, policy):
    """The index of the estimate `policy` picks, and why, in words.

    Args:
        estimates: a list of `Estimate`, replication first.
        policy: `"auto"`, `"memory"` or `"communication"`.

    Returns:
        `(index, reason)`.
    """
    key = POLICY_KEYS[policy]
    index = min(range(len(estimates)), key=lambda i: (key(estimates[i]), i))
    what = {
        "auto": "the lowest estimated step time",
        "memory": "the fewest bytes per device",
        "communication": "the fewest collective bytes",
    }[policy]
    others = "; ".join(e.short() for i, e in enumerate(estimates) if i != index)
    reason = (
        f"policy {policy!r} chose {estimates[index].short()}, "
        f"{what}; over {others}"
    )
    return index, reason


def choose_sequence_parallel(
    option, policy, *, model_size, row_parallel, residual_bytes_per_token
):
    """Whether the residual stream is split over the sequence, and why.

    The two candidates, per row-parallel projection and training step,
    with `r` the residual stream's bytes per token and `t` the tokens per
    device: the all-reduce pattern all-reduces `t * r` forward (the
    projection's output) and backward (the column-parallel input's
    gradient), 2 collectives of `2 t r (m - 1) / m` link bytes each on a
    ring of `m`; sequence parallelism replaces each by a reduce-scatter
    and an all-gather of `t r (m - 1) / m` link bytes each: the same
    link bytes, twice the collectives. What differs is memory: between
    the projections (norms, residual adds, dropout) each device holds
    `t r / m` rather than `t r` per tensor. So `"memory"` takes it, and
    `"auto"` and `"communication"`, equal in bytes, keep the fewer,
    larger collectives.

    Args:
        option: `"auto"`, `True` or `False` (the request's).
        policy: the request's policy.
        model_size: the size of the model axis.
        row_parallel: the number of row-parallel projections planned.
        residual_bytes_per_token: `r`.

    Returns:
        `(enabled, reason)`.
    """
    if model_size <= 1 or row_parallel == 0:
        why = (
            f"the model axis has {model_size} device"
            if model_size <= 1
            else "no projection is row-parallel on the model axis"
        )
        return False, f"off: {why}, so there is no all-reduce to split"
    held = (
        f"residual-width activations held 1/{model_size} per device "
        f"({residual_bytes_per_token} B a token -> "
        f"{residual_bytes_per_token / model_size:.4g} B), the same link "
        f"bytes, {2 * row_parallel} collectives a step forward instead of "
        f"{row_parallel}"
    )
    if option is True:
        return True, f"on (asked for): {held}"
    if option is False:
        return False, f"off (asked for); on would give {held}"
    if policy == "memory":
        return True, f"on (policy 'memory'): {held}"
    return False, (
        f"off (policy {policy!r}: equal link bytes, so the fewer "
        f"collectives win; pass sequence_parallel=True or policy='memory' "
        f"for {held})"
    )


def estimate_plan(plan, model=None):
    """The estimate of a whole `LayoutPlan`: every weight's, summed.

    Each weight is estimated as placed, its neighbours being the axes that
    shard the other weights of its layer in the plan.

    Args:
        plan: a `LayoutPlan`.
        model: a `CostModel`; defaults to one for the plan's tokens per
            step (or the default when the plan has none).

    Returns:
        An `Estimate` with `spec` `()` and the plan's totals.
    """
    from keras_nlp.distribution.rules import DATA
    from keras_nlp.distribution.rules import role_axes_for

    if model is None:
        model = CostModel(
            tokens_per_step=plan.tokens_per_step or DEFAULT_TOKENS_PER_STEP
        )
    axis_sizes = plan.mesh.axis_sizes
    roles = role_axes_for(
        plan.model_axis,
        plan.data_axis,
        plan.expert_axis,
        plan.fsdp_axis,
        plan.context_axis,
    )
    batch_axes = plan.token_axes
    layer_axes = {}
    for weight in plan.weights:
        if len(weight.shape) >= 2:
            layer_axes.setdefault(layer_of(weight.path), set()).update(
                a for entry in weight.spec for a in entry_axes(entry)
            )
    state = touched = 0
    collectives = {}
    for weight in plan.weights:
        part = estimate(
            weight.shape,
            weight.dtype,
            weight.spec,
            weight.dim_names,
            axis_sizes,
            batch_axes,
            model,
            sharded_neighbours=layer_axes.get(layer_of(weight.path), ()),
            fsdp_axes=roles[DATA],
        )
        state += part.state_bytes
        touched += part.touched_bytes
        for kind, count in part.collectives.items():
            collectives[kind] = collectives.get(kind, 0) + count
    return Estimate(
        spec=(),
        label=f"{plan.preset or plan.backbone} on {plan.mesh}",
        state_bytes=state,
        touched_bytes=touched,
        collectives=collectives,
        time_us=model.time_us(collectives, touched),
    )
