"""Arrays whose devices span processes: the mesh, the batch, the results.

Each process holds data only on its own devices (`jax.local_devices()`),
so a batch is fed in per-process parts and a sharded result is gathered
before NumPy can read it (`numpy.asarray` raises on an array with shards
in other processes). Each helper also works in a single process.
"""

import keras
import numpy as np

from keras_nlp.multihost.cluster import jax_module
from keras_nlp.multihost.cluster import process_count


def global_device_mesh(shape, axis_names=("batch", "model")):
    """A `keras.distribution.DeviceMesh` over every process's devices.

    Devices are ordered by process, so on a `(num_processes, d)` mesh each
    process owns one row of the first axis (its batch shard) and model
    parallelism stays within a host; a mesh whose model axis is larger than
    one host's devices spans hosts.

    Args:
        shape: tuple of ints whose product is the number of devices of the
            whole cluster.
        axis_names: tuple of str, one per axis.

    Returns:
        A `keras.distribution.DeviceMesh`.

    Example:

    ```python
    import keras
    from keras_nlp import multihost

    n = len(keras.distribution.list_devices())
    mesh = multihost.global_device_mesh((1, n))
    ```
    """
    devices = keras.distribution.list_devices()
    jax = jax_module()
    if jax is not None:
        by_id = {d.id: d for d in jax.devices()}

        def owner(name):
            device = by_id[int(name.rpartition(":")[2])]
            return (device.process_index, device.id)

        devices = sorted(devices, key=owner)
    if int(np.prod(shape)) != len(devices):
        raise ValueError(
            f"A mesh of shape {tuple(shape)} needs {int(np.prod(shape))} "
            f"devices; the cluster has {len(devices)} "
            f"({process_count()} process(es))."
        )
    return keras.distribution.DeviceMesh(tuple(shape), axis_names, devices)


def _data_sharding(distribution, shape):
    layout = distribution.get_data_layout(shape)
    return getattr(layout, "backend_layout", layout)


def process_batch_slice(global_batch_size, distribution=None):
    """The rows of the global batch that this process must feed.

    On a `(2, 4)` mesh process `p` of two feeds half the batch; on a
    `(1, 8)` mesh the batch is not split across processes and every process
    feeds all of it.

    Args:
        global_batch_size: int.
        distribution: a `keras.distribution.Distribution`; defaults to the
            current one.

    Returns:
        A `slice` of the batch dimension.
    """
    distribution = distribution or keras.distribution.distribution()
    jax = jax_module()
    if distribution is None or jax is None or jax.process_count() == 1:
        return slice(0, global_batch_size)
    sharding = _data_sharding(distribution, (global_batch_size,))
    rows = [
        index[0].indices(global_batch_size)[:2]
        for index in sharding.addressable_devices_indices_map(
            (global_batch_size,)
        ).values()
    ]
    start, stop = min(r[0] for r in rows), max(r[1] for r in rows)
    return slice(start, stop)


def make_global_batch(local_batch, distribution=None):
    """Assembles every process's part of a batch into global arrays.

    Each process passes its rows of the global batch (see
    `process_batch_slice`); the result is one `jax.Array` per input, laid
    out by the distribution's data layout (batch dimension on its batch
    axis), that a jitted step or the backbone itself takes as is. In a
    single process or without a distribution the batch is returned as it
    is. This is for custom steps and direct calls: `Model.fit`, `evaluate`
    and `predict` under `ModelParallel` expect the *global* data in every
    process and shard it across processes themselves, so giving them
    per-process rows silently trains on a subset of the batch.

    Args:
        local_batch: an array, or a dict / list of arrays, batch first.
        distribution: a `keras.distribution.Distribution`; defaults to the
            current one.

    Returns:
        The same structure of global `jax.Array`s.

    Example:

    ```python
    import numpy as np
    from keras_nlp import multihost

    tokens = np.zeros((8, 16), "int32")
    rows = multihost.process_batch_slice(len(tokens))
    batch = multihost.make_global_batch({"token_ids": tokens[rows]})
    ```
    """
    distribution = distribution or keras.distribution.distribution()
    jax = jax_module()
    if distribution is None or jax is None or jax.process_count() == 1:
        return local_batch

    def to_global(value):
        value = np.asarray(value)
        # The data layout depends only on the rank and the batch dimension.
        sharding = _data_sharding(distribution, value.shape)
        return jax.make_array_from_process_local_data(sharding, value)

    return keras.tree.map_structure(to_global, local_batch)


def gather(value):
    """The whole value as NumPy in every process, wherever its shards are.

    A sharded array spanning other processes' devices cannot be read
    directly; this gathers it (a collective: every process must call
    `gather` on the same values in the same order).

    Args:
        value: an array, a `keras.Variable`, or a structure of them.

    Returns:
        The same structure of `numpy.ndarray`s.

    Example:

    ```python
    import keras
    from keras_nlp import multihost

    multihost.gather({"x": keras.ops.ones((2, 3))})["x"].shape  # (2, 3)
    ```
    """
    jax = jax_module()

    def to_numpy(item):
        if isinstance(item, keras.Variable):
            item = item.value
        if (
            jax is not None
            and isinstance(item, jax.Array)
            and not item.is_fully_addressable
        ):
            from jax.experimental import multihost_utils

            item = multihost_utils.process_allgather(item, tiled=True)
        return np.asarray(keras.ops.convert_to_numpy(item))

    return keras.tree.map_structure(to_numpy, value)
