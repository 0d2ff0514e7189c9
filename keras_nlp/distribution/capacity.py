"""Weights that cannot be allocated, refused before anything is allocated.

A backbone's constructor allocates every variable. A config whose weights
are larger than the memory they would go to (the host's for CPU devices,
the accelerator's own otherwise) used to fail deep inside the backend,
with an `OverflowError` or out of memory, after allocating what fitted.
`check_allocatable` estimates the bytes first and raises a `ValueError`
that gives the size, the largest weight and the arguments its shape comes
from; planning (`Backbone.plan_layout`, `python -m keras_nlp plan`) still
works, as it allocates nothing.

The check costs nothing for ordinary configs: a rough upper bound from the
size arguments is compared with the memory first, and only a config whose
bound comes near it is built abstractly (shapes only, cached with the
planner's) to count its real weights.
"""

import math
import os

from keras_nlp.distribution.backbone_planner import backbone_variables
from keras_nlp.distribution.formatting import format_bytes
from keras_nlp.distribution.layout_plan import dtype_itemsize
from keras_nlp.distribution.shapes import in_abstract_build

# Matrices of the bound per counted layer: attention and gated
# feed-forward kernels, twice over where one count is per stack (T5's
# `num_layers` is the encoder's and the decoder's); fp32 bytes.
_MATRICES_PER_LAYER = 16
_BOUND_ITEMSIZE = 4
# The abstract build runs once the rough bound reaches this share of the
# memory: far below, the weights surely fit.
_BOUND_SHARE = 1 / 8


def device_memory(device):
    """`(bytes, words)`: the memory a JAX `device` holds, and its name.

    A CPU device's memory is the host's (fake devices share it); an
    accelerator's is its own, where the runtime reports it (`None`
    otherwise).
    """
    if device is None or device.platform == "cpu":
        return host_memory(), "this host's memory"
    stats = device.memory_stats() or {}
    limit = stats.get("bytes_limit")
    return (int(limit) if limit else None), f"{device.device_kind} memory"


def host_memory():
    """Bytes of physical memory on this host, or `None` where unknown."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def rough_bound(sizes):
    """An upper bound of a config's weight bytes from its size arguments.

    Args:
        sizes: dict of the config's size arguments (name -> positive int).

    Each layer is taken to hold a few matrices of the two largest widths
    other than the vocabulary; the vocabulary and a length
    (`max_sequence_length`) add tables of the largest width; the layer
    counts add up and the expert count multiplies them.
    """
    layers = sum(v for n, v in sizes.items() if _is_layer_count(n))
    experts = max(
        (v for n, v in sizes.items() if _is_expert_count(n)), default=1
    )
    tables = sum(
        v for n, v in sizes.items() if _is_length(n) or _is_vocabulary(n)
    )
    widths = sorted(
        v
        for n, v in sizes.items()
        if not (
            _is_layer_count(n)
            or _is_expert_count(n)
            or _is_length(n)
            or _is_vocabulary(n)
        )
    )
    matrix = math.prod(widths[-2:]) if widths else 1
    largest = widths[-1] if widths else 1
    per_layer = matrix * _MATRICES_PER_LAYER * experts
    return ((1 + layers) * per_layer + 2 * tables * largest) * _BOUND_ITEMSIZE


def check_allocatable(
    backbone_cls, arguments, sizes, plan=None, device_mesh=None
):
    """Raises a `ValueError` if `backbone_cls(**arguments)` cannot be
    allocated where its variables go.

    Args:
        backbone_cls: the backbone class.
        arguments: its constructor arguments (the config).
        sizes: the size arguments among them (name -> positive int).
        plan: the `LayoutPlan` of the active layout map, if any: each
            device then holds its shards (`plan.bytes_per_device`).
        device_mesh: the plan's `keras.distribution.DeviceMesh`.
    """
    if in_abstract_build():  # allocates nothing
        return
    devices = _local_devices(device_mesh)
    capacity, where = device_memory(devices[0] if devices else None)
    if capacity is None:
        return
    # Fake CPU devices share the host: its memory holds all their shards.
    sharing = len(devices) if devices and devices[0].platform == "cpu" else 1
    if plan is None and rough_bound(sizes) < capacity * _BOUND_SHARE:
        return
    if plan is not None:
        needed = plan.bytes_per_device * sharing
        held = f"{format_bytes(plan.bytes_per_device)} per device on mesh " + (
            f"{plan.mesh}, {format_bytes(needed)} for this host's "
            f"{sharing} devices"
            if sharing > 1
            else f"{plan.mesh}"
        )
        weights = [(w.path, w.shape, w.params, w.bytes) for w in plan.weights]
    else:
        weights = [
            (v.path, v.shape, v.size, v.size * dtype_itemsize(v.dtype))
            for v in backbone_variables(backbone_cls, arguments)
        ]
        needed = sum(weight[3] for weight in weights)
        held = format_bytes(needed)
    if needed <= capacity:
        return
    total_params = sum(weight[2] for weight in weights)
    path, shape, _, size = max(weights, key=lambda weight: weight[3])
    sources = _arguments_of(shape, sizes)
    raise ValueError(
        f"{backbone_cls.__name__} cannot be allocated: its "
        f"{total_params:,} parameters need {held}, more than {where} "
        f"({format_bytes(capacity)}). The largest weight is {path}, shape "
        f"{tuple(shape)} ({format_bytes(size)})"
        + (f", from {sources}" if sources else "")
        + ". Smaller sizes, a lower-precision `dtype` or more devices would "
        f"fit; `{backbone_cls.__name__}.plan_layout(mesh, config=...)` and "
        "`python -m keras_nlp plan` plan it without allocating."
    )


def _local_devices(device_mesh):
    """The JAX devices of this process that hold the variables: the first
    local device, or the mesh's local devices (Keras names them
    `"cpu:0"`, ...)."""
    import keras

    if keras.backend.backend() != "jax":
        return []
    import jax

    local = jax.local_devices()
    if device_mesh is None:
        return local[:1]
    names = {
        f"{entry.platform}:{entry.id}" if hasattr(entry, "id") else entry
        for entry in device_mesh.devices.flat
    }
    return [d for d in local if f"{d.platform}:{d.id}" in names]


def _arguments_of(shape, sizes):
    """`"vocabulary_size=..., hidden_dim=..."`: the size arguments whose
    values are the shape's dimensions."""
    named = []
    for dim in shape:
        for name, value in sizes.items():
            if value == dim and name not in named:
                named.append(name)
                break
    return ", ".join(f"{name}={sizes[name]}" for name in named)


def _is_layer_count(name):
    return name.startswith("num_") and name.endswith("layers")


def _is_expert_count(name):
    return name.startswith("num_") and name.endswith("experts")


def _is_length(name):
    return name.endswith("_length") or "window" in name


def _is_vocabulary(name):
    return "vocabulary" in name
