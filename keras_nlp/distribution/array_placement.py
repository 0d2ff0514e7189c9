"""Placing generation's arrays: prompts over the batch axes, caches in shards.

`keras_nlp.models.CausalLM.generate` runs one compiled loop whose inputs
are placed here before it starts: the prompts split over the distribution's
batch axes (where they divide the batch, else whole on every device), and
each key/value cache allocated directly in the shards its `CachePlan` gives
(see `keras_nlp.distribution.kv_cache`), never whole on one device. Without
a distribution, or on a backend other than JAX, arrays stay as they are.
"""

import keras
import numpy as np

from keras_nlp.distribution.kv_cache import cache_spec
from keras_nlp.distribution.layout_map import active_layout_map
from keras_nlp.distribution.layout_map import batch_axes_of
from keras_nlp.distribution.rules import entry_axes


def planned_cache_specs(plans, batch_size, max_length=None):
    """Each `CachePlan`'s spec for `batch_size` (and `max_length`, when a
    plan may split the length), or `None` when unplanned.

    The batch goes on the active distribution's batch axes when they divide
    `batch_size`, else it stays whole.
    """
    layout_map = active_layout_map()
    if not plans or layout_map is None:
        return None
    mesh = layout_map.device_mesh
    sizes = dict(zip(mesh.axis_names, mesh.shape, strict=True))
    return [
        tuple(
            _without_unit_axes(entry, sizes)
            for entry in cache_spec(
                plan, batch_size, sizes, layout_map.batch_axes, max_length
            )
        )
        for plan in plans
    ]


def _without_unit_axes(entry, sizes):
    """A spec entry without axes of size 1, which shard nothing (and which
    JAX drops from the shardings it reports)."""
    kept = tuple(a for a in entry_axes(entry) if sizes[a] > 1)
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else kept


def allocate_caches(shapes, dtype, specs=None):
    """Zero caches of `shapes`, each allocated in its shards.

    Args:
        shapes: the caches' shapes.
        dtype: their dtype.
        specs: optional mesh-axis specs, one per cache (from
            `planned_cache_specs`); `None` allocates plain arrays.

    Returns:
        A list of arrays.
    """
    if specs is None or keras.backend.backend() != "jax":
        return [keras.ops.zeros(shape, dtype) for shape in shapes]
    import jax
    import jax.numpy as jnp

    mesh = active_layout_map().device_mesh.backend_mesh
    caches = []
    for shape, spec in zip(shapes, specs, strict=True):
        sharding = jax.sharding.NamedSharding(
            mesh, jax.sharding.PartitionSpec(*spec)
        )
        # Each device creates only its shard, and nothing is compiled anew
        # per call.
        caches.append(jnp.zeros(shape, dtype, device=sharding))
    return caches


def shard_batch(array):
    """`array` split over the batch axes along its first dimension.

    Under a JAX distribution the array is placed with its batch on the
    distribution's batch axes when they divide it, else whole on every
    device of the mesh; otherwise it is returned as it is.
    """
    distribution = keras.distribution.distribution()
    if distribution is None or keras.backend.backend() != "jax":
        return array
    import jax

    mesh = distribution.device_mesh
    sizes = dict(zip(mesh.axis_names, mesh.shape, strict=True))
    axes = batch_axes_of(distribution)
    shards = int(np.prod([sizes[axis] for axis in axes])) if axes else 1
    array = np.asarray(array)
    batch = None
    if axes and array.shape[0] % shards == 0:
        batch = axes[0] if len(axes) == 1 else tuple(axes)
    spec = jax.sharding.PartitionSpec(batch, *([None] * (array.ndim - 1)))
    return jax.device_put(
        array, jax.sharding.NamedSharding(mesh.backend_mesh, spec)
    )
