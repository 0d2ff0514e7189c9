"""Layouts of quantized weights, derived from their float kernels' plans.

Keras 3.15 quantizes a built layer in place (`model.quantize(mode)`):

- `"int8"`: a `Dense` or `EinsumDense` keeps its `kernel` (now int8, same
  shape) and adds `kernel_scale`, one scale per output channel: `(units,)`
  for a `Dense`; for an `EinsumDense`, one entry per output letter of its
  equation (the kernel's size for the kernel's letters, 1 for the batch's
  and sequence's). An `Embedding` or `ReversibleEmbedding` keeps
  `embeddings` (and an untied `reverse_embeddings`) in int8 and adds
  `embeddings_scale` (and `reverse_embeddings_scale`), one per vocabulary
  entry.
- `"int4"`: two values a byte. A `Dense` kernel `(in, out)` is stored
  `(in, ceil(out / 2))`, packed along its outputs; an `EinsumDense` kernel
  is first reshaped (row-major, no transpose) to `(rows, columns)`, rows
  the product of its contracted dimensions, then packed along columns.
  Per channel (`block_size` `None` or -1) a `kernel_scale` has one entry
  per column; in groups of `block_size` rows (Keras's default, 128) the
  scale and an int8 `kernel_zero` are `(groups, columns)` and a float
  `g_idx` `(rows,)` maps each row to its group. An embedding
  `(vocabulary, hidden)` is packed along hidden, with `embeddings_scale`
  and `embeddings_zero` `(vocabulary,)` or `(vocabulary, groups)` and
  `g_idx` `(hidden,)`; an untied `reverse_embeddings` `(hidden,
  vocabulary)` is packed along hidden, its scale and zero `(vocabulary,)`
  or `(groups, vocabulary)`.
- `"float8"`: the kernel stays in its float dtype; six per-tensor scalars
  and amax histories are added (`inputs_scale`, `inputs_amax_history`,
  `kernel_scale`, `kernel_amax_history`, `outputs_grad_scale`,
  `outputs_grad_amax_history`).

`plan_quantized` lays every one of them out before Keras creates it,
from the float kernel's plan:

- A quantized kernel keeps its float plan (int8), or (int4) each stored
  dimension takes the axes of the kernel dimension it starts with: a
  reshaped dimension starts a block of the flat kernel only at its major
  dimension, so a model-like axis (model, expert) is kept where the major
  dimension of its group has it and the split still divides the packed
  or reshaped size. An axis it cannot keep moves to any stored dimension
  it divides, for memory (said in the reason): the weight is gathered
  along it before use, as along a batch axis (data, fsdp), which splits
  weights for memory only.
- A per-channel scale takes the model-like axes of the channels it
  scales, so each device holds the scales of its own outputs, and is
  replicated along the batch axes (it is a few thousandths of its
  kernel). Grouped int4 scales and zeros are a twelfth of their kernel,
  so they take all its axes: groups split with their rows when whole
  groups stay on each device, and an axis neither keeps moves where it
  divides; `g_idx` (a float per row) splits with the rows.
- float8's per-tensor values are the same on every device: replicated.

Scales (and an untied reverse embedding's int4 zeros) are in the float
dtype of their kernel, as Keras creates them; `g_idx` and float8's
statistics in float32, int4 zeros (else) in int8.

Other modes (`gptq`, `awq`) are not planned yet and are refused under a
layout map, never replicated silently.
"""

import dataclasses
import math

from keras_nlp.distribution.layout_errors import LayoutError
from keras_nlp.distribution.placement import derived_weight_plan
from keras_nlp.distribution.placement import shard_shape
from keras_nlp.distribution.quantizable import describe_layer
from keras_nlp.distribution.quantizable import layer_policy
from keras_nlp.distribution.quantizable import quantized_by_keras
from keras_nlp.distribution.rules import entry_axes
from keras_nlp.distribution.rules import format_spec

PLANNED_MODES = ("int8", "int4", "float8")
FLOAT8_VARIABLES = (
    "inputs_scale",
    "inputs_amax_history",
    "kernel_scale",
    "kernel_amax_history",
    "outputs_grad_scale",
    "outputs_grad_amax_history",
)
# Keras's length of a float8 amax history.
AMAX_HISTORY_LENGTH = 1024
# Keras's int4 group size when no config names one.
DEFAULT_INT4_BLOCK_SIZE = 128


def check_planned_mode(mode):
    """Raises a `LayoutError` for a mode whose layouts are not planned."""
    if mode not in PLANNED_MODES:
        raise LayoutError(
            f"quantize({mode!r}) is not planned under a layout map yet: its "
            "variables would be replicated on every device. Under "
            f"ModelParallel use one of {PLANNED_MODES}, or quantize "
            "without a distribution."
        )


def int4_block_size(config):
    """The int4 group size a `quantize` call uses (`None`: per channel)."""
    block_size = getattr(config, "block_size", DEFAULT_INT4_BLOCK_SIZE)
    return None if block_size in (None, -1) else block_size


@dataclasses.dataclass(frozen=True)
class _Stored:
    """A stored (quantized) form of a kernel: its shape, the spec each
    dimension can keep, and what was dropped on the way."""

    shape: tuple
    spec: tuple
    names: tuple
    dropped: tuple = ()
    moved: tuple = ()


def _shards(entry, axis_sizes):
    return math.prod(axis_sizes[a] for a in entry_axes(entry))


def _flatten(kernel, rows, axis_sizes):
    """The row-major reshape of `kernel` to `(rows, size // rows)`.

    A flat dimension keeps the entry of the first kernel dimension it
    starts with, when that dimension (and nothing before it in the
    group) is split and the split divides the flat size; any other split
    of the kernel is listed as dropped.
    """
    shape, spec = kernel.shape, kernel.spec
    names = kernel.dim_names or (None,) * len(shape)
    columns = math.prod(shape) // rows
    # Kernel dimension each flat dimension starts with, when it starts
    # one (rows always start with the first dimension larger than 1).
    starts = {}
    for i, size in enumerate(shape):
        if size > 1:
            starts.setdefault("rows", i)
        if math.prod(shape[i:]) == columns and size > 1:
            starts.setdefault("columns", i)
    flat_spec, flat_names, kept = [], [], set()
    for which, size in (("rows", rows), ("columns", columns)):
        i = starts.get(which)
        entry = None if i is None else spec[i]
        if entry is not None and size % _shards(entry, axis_sizes) == 0:
            kept.add(i)
            flat_spec.append(entry)
            flat_names.append(names[i])
        else:
            flat_spec.append(None)
            flat_names.append(None)
    dropped = tuple(
        axis
        for i, entry in enumerate(spec)
        if i not in kept
        for axis in entry_axes(entry)
    )
    return _Stored(
        (rows, columns), tuple(flat_spec), tuple(flat_names), dropped
    )


def _pack(stored, dim, axis_sizes):
    """`stored` with dimension `dim` holding two values a byte: a split
    stays when every device's share is whole bytes."""
    shape, spec = list(stored.shape), list(stored.spec)
    size, entry = shape[dim], spec[dim]
    shape[dim] = (size + 1) // 2
    dropped = stored.dropped
    if entry is not None and size % (2 * _shards(entry, axis_sizes)):
        dropped += entry_axes(entry)
        spec[dim] = None
    return _Stored(tuple(shape), tuple(spec), stored.names, dropped)


def _place_axes(stored, axis_sizes):
    """Moves the dropped axes to any dimension they divide (`moved`);
    those that divide none stay `dropped` (replicated along)."""
    spec, dropped, moved = list(stored.spec), [], []
    for axis in stored.dropped:
        for d, size in enumerate(stored.shape):
            axes = entry_axes(spec[d]) + (axis,)
            if size % math.prod(axis_sizes[a] for a in axes) == 0:
                spec[d] = axes[0] if len(axes) == 1 else axes
                moved.append(axis)
                break
        else:
            dropped.append(axis)
    return dataclasses.replace(
        stored,
        spec=tuple(spec),
        dropped=tuple(dropped),
        moved=stored.moved + tuple(moved),
    )


def _fit(shape, spec, axis_sizes):
    """`spec` without the splits that do not divide their dimension."""
    return tuple(
        entry if size % _shards(entry, axis_sizes) == 0 else None
        for size, entry in zip(shape, spec, strict=True)
    )


def _model_like(entry, batch_axes):
    """`entry` without the batch axes."""
    axes = tuple(a for a in entry_axes(entry) if a not in batch_axes)
    if not axes:
        return None
    return axes[0] if len(axes) == 1 else axes


def _derived(path, shape, dtype, spec, names, plan, reason):
    """A variable derived from `kernel`; a split that does not divide its
    dimension (an odd channel count after packing) is dropped there."""
    axis_sizes = plan.mesh.axis_sizes
    return derived_weight_plan(
        path,
        shape,
        dtype,
        _fit(shape, spec, axis_sizes),
        axis_sizes,
        reason,
        names if any(n is not None for n in names) else None,
    )


def _einsum_parts(equation):
    """`(kernel letters, output letters)` of an `EinsumDense` equation."""
    inputs, output = equation.split("->")
    kernel = inputs.split(",")[1]
    if "..." in kernel or "..." in output:
        raise LayoutError(
            f"Cannot plan the quantized scale of an EinsumDense with an "
            f"ellipsis ({equation!r})."
        )
    return kernel, output


def _int8_variables(description, kernel, kind, prefix, plan):
    """The int8 kernel and its per-channel scale."""
    batch_axes = plan.batch_axes
    if kind == "einsum":
        letters, output = _einsum_parts(description.equation)
        dims = [letters.index(c) if c in letters else None for c in output]
    elif kind == "embeddings":
        dims = [0]  # one per vocabulary row
    else:
        dims = [len(kernel.shape) - 1]  # one per output column
    names = kernel.dim_names or (None,) * len(kernel.shape)
    scale = _derived(
        f"{prefix}_scale",
        [1 if d is None else kernel.shape[d] for d in dims],
        kernel.dtype,
        [
            None if d is None else _model_like(kernel.spec[d], batch_axes)
            for d in dims
        ],
        [None if d is None else names[d] for d in dims],
        plan,
        f"int8 scale of {kernel.path} laid out "
        f"{format_spec(kernel.spec)}: its output channels keep the "
        "kernel's model-like axes, replicated along the batch axes",
    )
    return dataclasses.replace(kernel, dtype="int8"), [scale]


def _int4_stored(description, kernel, kind, axis_sizes):
    """The packed int4 form of `kernel`, and which of its dimensions are
    `(rows, channels)`: grouped along rows, one scale per channel."""
    names = kernel.dim_names or (None,) * len(kernel.shape)
    whole = _Stored(kernel.shape, kernel.spec, names)
    if kind == "einsum":
        letters, output = _einsum_parts(description.equation)
        rows = math.prod(
            size
            for letter, size in zip(letters, kernel.shape, strict=True)
            if letter not in output
        )
        return _pack(_flatten(kernel, rows, axis_sizes), 1, axis_sizes), 0, 1
    if kind == "reverse":  # (hidden, vocabulary), packed along hidden
        return _pack(whole, 0, axis_sizes), 0, 1
    # dense (in, out) and embeddings (vocabulary, hidden): packed last.
    stored = _pack(whole, 1, axis_sizes)
    return (stored, 1, 0) if kind == "embeddings" else (stored, 0, 1)


def _int4_variables(description, kernel, kind, prefix, plan, block_size):
    """The packed int4 kernel, its scales, zeros and group index."""
    axis_sizes, batch_axes = plan.mesh.axis_sizes, plan.batch_axes
    stored, row_dim, channel_dim = _int4_stored(
        description, kernel, kind, axis_sizes
    )
    stored = _place_axes(stored, axis_sizes)
    # The unpacked sizes and splits of the grouped and the scaled
    # dimension: the flat kernel's for an EinsumDense, else the kernel's.
    if kind == "einsum":
        rows = stored.shape[0]
        channels = math.prod(kernel.shape) // rows
        row_entry, channel_entry = stored.spec
    else:
        rows = kernel.shape[row_dim]
        channels = kernel.shape[channel_dim]
        row_entry = kernel.spec[row_dim]
        channel_entry = kernel.spec[channel_dim]
    names = stored.names
    row_name, channel_name = names[row_dim], names[channel_dim]
    where = f"int4 {kernel.path} laid out {format_spec(kernel.spec)}"
    kernel_reason = (
        f"{where}, stored {stored.shape} two values a byte: "
        f"{format_spec(stored.spec)}"
    )
    if stored.moved:
        kernel_reason += (
            f"; {', '.join(stored.moved)} moved where it divides, for "
            "memory (the packed or reshaped kernel cannot keep its split; "
            "gathered before use)"
        )
    if stored.dropped:
        kernel_reason += (
            f"; replicated along {', '.join(stored.dropped)}: it divides "
            "no dimension of the packed or reshaped kernel"
        )
    packed = dataclasses.replace(
        kernel,
        shape=stored.shape,
        dtype="int8",
        spec=stored.spec,
        shard_shape=shard_shape(stored.shape, stored.spec, axis_sizes),
        dim_names=(names if any(n is not None for n in names) else None),
        reason=kernel_reason,
    )
    # Variables after the kernel, in Keras's order: scale, zero, g_idx.
    # Grouped scales of the reverse embedding sit (groups, vocabulary),
    # the others (channels, groups) or (groups, channels) as built.
    added = []
    if block_size is None:
        added.append(
            _derived(
                f"{prefix}_scale",
                (channels,),
                kernel.dtype,
                (_model_like(channel_entry, batch_axes),),
                (channel_name,),
                plan,
                f"per-channel scale of {where}: its channels keep the "
                "kernel's model-like axes",
            )
        )
        return packed, added
    groups = -(-rows // block_size)
    # Whole groups on each device: the rows' split divides the groups.
    group_entry = row_entry
    if group_entry is not None and (
        rows % block_size or groups % _shards(group_entry, axis_sizes)
    ):
        group_entry = None
    if kind == "embeddings":
        grouped_shape = (channels, groups)
        grouped_spec = (channel_entry, group_entry)
        grouped_names = (channel_name, None)
    else:
        grouped_shape = (groups, channels)
        grouped_spec = (group_entry, channel_entry)
        grouped_names = (None, channel_name)
    # Axes the groups or channels cannot keep go where they divide, for
    # memory (a twelfth of the kernel; gathered before use).
    grouped_spec = _fit(grouped_shape, grouped_spec, axis_sizes)
    kept = {a for entry in grouped_spec for a in entry_axes(entry)}
    missing = tuple(
        a
        for entry in stored.spec + kernel.spec
        for a in entry_axes(entry)
        if a not in kept
    )
    grouped_spec = _place_axes(
        _Stored(
            grouped_shape,
            grouped_spec,
            grouped_names,
            tuple(dict.fromkeys(missing)),
        ),
        axis_sizes,
    ).spec
    reason = (
        f"groups of {block_size} rows of {where}: whole groups and the "
        "channels keep the kernel's axes (any other where it divides)"
    )
    zero_dtype = kernel.dtype if kind == "reverse" else "int8"
    for suffix, dtype in (("_scale", kernel.dtype), ("_zero", zero_dtype)):
        added.append(
            _derived(
                f"{prefix}{suffix}",
                grouped_shape,
                dtype,
                grouped_spec,
                grouped_names,
                plan,
                reason,
            )
        )
    if kind == "embeddings":
        # It picks each hidden unit's group from every token's looked-up
        # scales. Split over the batch axis that splits the tokens too,
        # that take fails XLA's HLO verifier ("Slice dim size 8 greater
        # than dynamic slice dimension: 4"; int4 T5 on 2x4).
        g_idx_prefix = kernel.path.rpartition("/")[0]
        added.append(
            _derived(
                f"{g_idx_prefix}/g_idx",
                (rows,),
                "float32",
                (None,),
                (row_name,),
                plan,
                f"group of each hidden unit of {where}: replicated, a "
                "vocabulary-th of the table's bytes, read for every token",
            )
        )
    elif kind != "reverse":
        g_idx_prefix = kernel.path.rpartition("/")[0]
        added.append(
            _derived(
                f"{g_idx_prefix}/g_idx",
                (rows,),
                "float32",
                (row_entry,),
                (row_name,),
                plan,
                f"group of each row of {where}: split with the rows "
                "(8 / columns of the kernel's bytes, too many to repeat)",
            )
        )
    return packed, added


def _float8_variables(kernel, plan):
    prefix = kernel.path.rpartition("/")[0]
    added = []
    for name in FLOAT8_VARIABLES:
        shape = (AMAX_HISTORY_LENGTH,) if "history" in name else ()
        added.append(
            derived_weight_plan(
                f"{prefix}/{name}",
                shape,
                "float32",
                (None,) * len(shape),
                plan.mesh.axis_sizes,
                "float8 per-tensor scale or amax history: the same on "
                "every device",
            )
        )
    return added


def _layer_variables(description, mode, weights, plan, block_size):
    """`(replacements, additions)`: WeightPlans for one quantized layer."""
    replaced, added = {}, []
    for kernel_path, name, kind in description.kernels:
        kernel = weights.get(kernel_path)
        if kernel is None:
            raise LayoutError(
                f"{kernel_path} is quantized but not in the plan, so its "
                "scale cannot be laid out."
            )
        prefix = f"{kernel_path.rpartition('/')[0]}/{name}"
        if mode == "float8":
            added.extend(_float8_variables(kernel, plan))
            continue
        if mode == "int8":
            new, extra = _int8_variables(
                description, kernel, kind, prefix, plan
            )
        else:
            new, extra = _int4_variables(
                description, kernel, kind, prefix, plan, block_size
            )
        replaced[kernel_path] = new
        added.extend(extra)
    return replaced, added


def _plan_layers(plan, chosen):
    """`plan` with the layers of `chosen`, `(description, mode, block
    size)` each, quantized: kernels replaced, new variables after each
    layer's last one (Keras's order)."""
    weights = {w.path: w for w in plan.weights}
    replaced, added_after = {}, {}
    for description, mode, block_size in chosen:
        changes, additions = _layer_variables(
            description, mode, weights, plan, block_size
        )
        replaced.update(changes)
        added_after.setdefault(description.anchor, []).extend(additions)
    result = []
    for weight in plan.weights:
        result.append(replaced.get(weight.path, weight))
        result.extend(added_after.pop(weight.path, ()))
    for leftovers in added_after.values():
        result.extend(leftovers)
    return dataclasses.replace(plan, weights=tuple(result))


def plan_quantized(model, plan, mode, filters=None, config=None):
    """The plan of `model` after `model.quantize(mode)`, before it runs.

    Args:
        model: the built backbone (its layers say what Keras quantizes).
        plan: its current `LayoutPlan`.
        mode: `"int8"`, `"int4"` or `"float8"`.
        filters: as `keras.Model.quantize` takes them: `None`, a regex or
            a list of them (searched in layer names), or a callable taking
            a layer.
        config: the `keras.quantizers.QuantizationConfig` of the call, if
            any (an int4 config's `block_size` sets the groups).

    Returns:
        A `LayoutPlan` whose quantized kernels are counted in their stored
        dtype, with every variable Keras adds, after its kernel.

    Raises:
        LayoutError: for a mode that is not planned, or a quantized layer
            whose kernel is not in the plan.
    """
    check_planned_mode(mode)
    block_size = int4_block_size(config)
    chosen = []
    for layer in model._flatten_layers():
        description = describe_layer(layer)
        if description is not None and quantized_by_keras(
            description, mode, filters, layer
        ):
            chosen.append((description, mode, block_size))
    return _plan_layers(plan, chosen)


def plan_quantized_config(plan, descriptions, policy_map):
    """The plan of a backbone built with a quantized `DTypePolicyMap`
    (a quantized preset's config), from its float plan.

    Args:
        plan: the `LayoutPlan` of the float config.
        descriptions: the `QuantizableLayer`s of its abstract build.
        policy_map: the config's `keras.dtype_policies.DTypePolicyMap`.

    Raises:
        LayoutError: for a policy whose mode is not planned.
    """
    chosen = []
    for description in descriptions:
        policy = layer_policy(policy_map, description)
        if policy is None:
            continue
        mode = policy.quantization_mode
        check_planned_mode(mode)
        if mode == "float8" and description.embedding:
            continue  # Keras keeps embeddings in float under float8
        chosen.append((description, mode, int4_block_size(policy)))
    return _plan_layers(plan, chosen)
