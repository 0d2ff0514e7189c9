"""LoRA adapters' layouts, derived from their kernels' (never from rules)."""

from keras_nlp.distribution.placement import derived_weight_plan
from keras_nlp.distribution.rules import format_spec

# Variables that Keras's `enable_lora` adds next to a layer's `kernel`.
LORA_ADAPTERS = ("lora_kernel_a", "lora_kernel_b")


def adapter_kernel_path(path):
    """The kernel path of a LoRA adapter path, or `None` for other paths."""
    prefix, _, name = path.rpartition("/")
    return f"{prefix}/kernel" if name in LORA_ADAPTERS else None


def plan_adapters(adapters, weights, request):
    """The plans of `adapters` from their kernels' plans in `weights`.

    Returns:
        `(plans, problems)`: a `WeightPlan` per adapter whose kernel is
        planned, and a line for each adapter whose kernel is not.
    """
    kernels = {weight.path: weight for weight in weights}
    plans, problems = [], []
    for variable in adapters:
        kernel_path = adapter_kernel_path(variable.path)
        kernel = kernels.get(kernel_path)
        if kernel is None:
            problems.append(
                f"{variable.path} has no planned kernel {kernel_path!r}"
            )
            continue
        plans.append(_adapter_plan(variable, kernel, request))
    return plans, problems


def _adapter_plan(variable, kernel, request):
    """An adapter's plan from its kernel's: shared dims keep their axes.

    Keras's `lora_kernel_a` has the kernel's shape with the last dimension
    replaced by the rank; `lora_kernel_b` is `(rank, last kernel dim)`. The
    rank dimension is replicated.
    """
    if variable.path.endswith("lora_kernel_a"):
        spec = kernel.spec[:-1] + (None,)
    else:
        spec = (None, kernel.spec[-1])
    return derived_weight_plan(
        variable.path,
        variable.shape,
        request.dtype_of(variable),
        spec,
        request.mesh.axis_sizes,
        (
            f"LoRA adapter of a kernel laid out {format_spec(kernel.spec)}: "
            "shared dimensions keep the kernel's axes, the rank is "
            "replicated"
        ),
    )
