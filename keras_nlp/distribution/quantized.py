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
- `"float8"`: the kernel stays in its float dtype; six per-tensor scalars
  and amax histories are added (`inputs_scale`, `inputs_amax_history`,
  `kernel_scale`, `kernel_amax_history`, `outputs_grad_scale`,
  `outputs_grad_amax_history`).

`plan_quantized` lays every one of them out before Keras creates it: an
int8 kernel keeps its float plan; a scale takes the axes its kernel's
output dimension has when they are model-like (model, expert), so each
device holds the scales of its own output channels, and is replicated
along the batch axes (data, fsdp), which split weights for memory only
(a scale is a thousandth of its kernel); float8's per-tensor values are
the same on every device: replicated. Other modes (`int4`, `gptq`, `awq`)
are not planned yet and are refused under a layout map, never replicated
silently.
"""

import dataclasses
import re

import keras

from keras_nlp.distribution.layout_errors import LayoutError
from keras_nlp.distribution.placement import derived_weight_plan
from keras_nlp.distribution.rules import entry_axes
from keras_nlp.distribution.rules import format_spec

PLANNED_MODES = ("int8", "float8")
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


def check_planned_mode(mode):
    """Raises a `LayoutError` for a mode whose layouts are not planned."""
    if mode not in PLANNED_MODES:
        raise LayoutError(
            f"quantize({mode!r}) is not planned under a layout map yet: its "
            "variables would be replicated on every device. Under "
            f"ModelParallel use one of {PLANNED_MODES}, or quantize "
            "without a distribution."
        )


def _scale_entry(entry, batch_axes):
    """A kernel dimension's axes without the batch axes, for its scale."""
    axes = tuple(a for a in entry_axes(entry) if a not in batch_axes)
    if not axes:
        return None
    return axes[0] if len(axes) == 1 else axes


def _int8_scale(kernel, scale_path, shape, kernel_dims, plan, batch_axes):
    """The plan of a scale whose dimension `i` is kernel dimension
    `kernel_dims[i]` (or `None`: a size-1 dimension)."""
    spec = tuple(
        None if dim is None else _scale_entry(kernel.spec[dim], batch_axes)
        for dim in kernel_dims
    )
    names = None
    if kernel.dim_names:
        names = tuple(
            None if dim is None else kernel.dim_names[dim]
            for dim in kernel_dims
        )
    return derived_weight_plan(
        scale_path,
        shape,
        "float32",
        spec,
        plan.mesh.axis_sizes,
        f"int8 scale of {kernel.path} laid out "
        f"{format_spec(kernel.spec)}: its output channels keep the kernel's "
        "model-like axes, replicated along the batch axes",
        names,
    )


def _kernel_variable(layer):
    # `kernel` is the LoRA-merged value once LoRA is on; `_kernel` is
    # always the variable.
    variable = getattr(layer, "_kernel", None)
    return layer.kernel if variable is None else variable


def _einsum_scale_dims(equation):
    """Kernel dimension of each scale dimension of an int8 `EinsumDense`."""
    inputs, output = equation.split("->")
    kernel = inputs.split(",")[1]
    if "..." in kernel or "..." in output:
        raise LayoutError(
            f"Cannot plan the int8 scale of an EinsumDense with an ellipsis "
            f"({equation!r})."
        )
    return [kernel.index(c) if c in kernel else None for c in output]


def _layer_variables(layer, mode, weights, plan, batch_axes):
    """`(replacements, additions)`: WeightPlans for one quantized layer."""
    replaced, added = {}, []
    if mode == "float8":
        if not isinstance(
            layer, (keras.layers.Dense, keras.layers.EinsumDense)
        ):
            return replaced, added
        prefix = _kernel_variable(layer).path.rpartition("/")[0]
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
        return replaced, added
    if isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense)):
        kernels = [(_kernel_variable(layer).path, "kernel_scale")]
    elif isinstance(layer, keras.layers.Embedding):
        kernels = [(layer.embeddings.path, "embeddings_scale")]
        reverse = getattr(layer, "reverse_embeddings", None)
        if reverse is not None and not getattr(layer, "tie_weights", True):
            kernels.append((reverse.path, "reverse_embeddings_scale"))
    else:
        return replaced, added
    for kernel_path, scale_name in kernels:
        kernel = weights.get(kernel_path)
        if kernel is None:
            raise LayoutError(
                f"{kernel_path} is quantized but not in the plan, so its "
                "scale cannot be laid out."
            )
        replaced[kernel_path] = dataclasses.replace(kernel, dtype="int8")
        scale_path = f"{kernel_path.rpartition('/')[0]}/{scale_name}"
        if isinstance(layer, keras.layers.EinsumDense):
            dims = _einsum_scale_dims(layer.equation)
        elif scale_name == "embeddings_scale":
            dims = [0]  # one per vocabulary row
        else:
            dims = [len(kernel.shape) - 1]  # one per output column
        shape = [1 if d is None else kernel.shape[d] for d in dims]
        added.append(
            _int8_scale(kernel, scale_path, shape, dims, plan, batch_axes)
        )
    return replaced, added


def plan_quantized(model, plan, mode, filters=None):
    """The plan of `model` after `model.quantize(mode)`, before it runs.

    Args:
        model: the built backbone (its layers say what Keras quantizes).
        plan: its current `LayoutPlan`.
        mode: `"int8"` or `"float8"`.
        filters: as `keras.Model.quantize` takes them: `None`, a regex or
            a list of them (searched in layer names), or a callable taking
            a layer.

    Returns:
        A `LayoutPlan` whose quantized kernels are counted in their stored
        dtype, with every variable Keras adds, after its kernel.

    Raises:
        LayoutError: for a mode that is not planned, or a quantized layer
            whose kernel is not in the plan.
    """
    check_planned_mode(mode)
    batch_axes = plan.batch_axes
    weights = {w.path: w for w in plan.weights}
    replaced, added_after = {}, {}
    for layer in model._flatten_layers():
        if not _quantized_by_keras(layer, mode, filters):
            continue
        changes, additions = _layer_variables(
            layer, mode, weights, plan, batch_axes
        )
        replaced.update(changes)
        if additions:
            anchor = layer.variables[-1].path if layer.variables else None
            added_after.setdefault(anchor, []).extend(additions)
    result = []
    for weight in plan.weights:
        result.append(replaced.get(weight.path, weight))
        result.extend(added_after.pop(weight.path, ()))
    for leftovers in added_after.values():
        result.extend(leftovers)
    return dataclasses.replace(plan, weights=tuple(result))


def _quantized_by_keras(layer, mode, filters):
    """Whether `keras.Model.quantize(mode, filters=filters)` quantizes it:
    a leaf `Dense`, `EinsumDense` or (int8) `Embedding` not quantized yet,
    whose name a regex filter finds (Keras matches names) or that a
    callable filter accepts."""
    if not isinstance(
        layer,
        (keras.layers.Dense, keras.layers.EinsumDense, keras.layers.Embedding),
    ):
        return False
    if len(list(layer._flatten_layers())) != 1:
        return False
    if getattr(layer, "quantization_mode", None) is not None:
        return False
    if mode == "float8" and isinstance(layer, keras.layers.Embedding):
        return False
    if filters is None:
        return True
    if callable(filters):
        return bool(filters(layer))
    patterns = [filters] if isinstance(filters, str) else list(filters)
    return any(re.search(pattern, layer.name) for pattern in patterns)
