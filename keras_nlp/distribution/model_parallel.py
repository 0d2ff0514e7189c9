"""`keras.distribution.ModelParallel` with the batch split over several axes.

On a `("data", "fsdp", "model")` mesh the weights shard over fsdp and
model (see `Backbone.get_layout_map(..., fsdp_dim_name="fsdp")`) while
every device of a model group should see its own slice of the batch: the
batch splits over both data and fsdp. Keras's `ModelParallel` takes one
batch axis; this subclass takes a tuple.
"""

import math

import keras

from keras_nlp.distribution.layout_map import _TensorLayout


class ModelParallel(keras.distribution.ModelParallel):
    """Keras's `ModelParallel`; `batch_dim_name` may name several axes.

    Args:
        layout_map: a `keras.distribution.LayoutMap` (e.g. from
            `Backbone.get_layout_map`).
        batch_dim_name: a mesh axis name, or a tuple of them, that split
            the batch (the first dimension of every input), in order.
            Defaults to the mesh's first axis.
        **kwargs: the other arguments of Keras's `ModelParallel`.

    Example:

    ```python
    import keras
    import keras_nlp

    devices = keras.distribution.list_devices()[:8]
    mesh = keras.distribution.DeviceMesh(
        (2, 2, 2), ("data", "fsdp", "model"), devices
    )
    layout_map = keras_nlp.models.GemmaBackbone.get_layout_map(
        mesh, data_parallel_dim_name="data", fsdp_dim_name="fsdp"
    )
    distribution = keras_nlp.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name=("data", "fsdp")
    )
    distribution.get_data_layout((8, 16)).axes  # (("data", "fsdp"), None)
    ```
    """

    def __init__(self, *, layout_map=None, batch_dim_name=None, **kwargs):
        names = batch_dim_name
        if names is None or isinstance(names, str):
            names = (names,) if names else ()
        names = tuple(names)
        mesh = getattr(layout_map, "device_mesh", None)
        if mesh is not None:
            unknown = [n for n in names if n not in mesh.axis_names]
            if unknown or len(set(names)) != len(names):
                raise ValueError(
                    f"batch_dim_name={batch_dim_name!r} must name distinct "
                    "axes of the device mesh, whose axis names are "
                    f"{list(mesh.axis_names)}."
                )
        super().__init__(
            layout_map=layout_map,
            batch_dim_name=names[0] if names else None,
            **kwargs,
        )
        self.batch_dim_names = names or (self.batch_dim_name,)

    @property
    def num_model_replicas(self):
        """Batch slices: the product of the batch axes' sizes."""
        sizes = dict(
            zip(
                self.device_mesh.axis_names,
                self.device_mesh.shape,
                strict=True,
            )
        )
        return math.prod(sizes[name] for name in self.batch_dim_names)

    def get_data_layout(self, data_shape):
        if len(self.batch_dim_names) == 1:
            return super().get_data_layout(data_shape)
        spec = [None] * len(data_shape)
        spec[0] = self.batch_dim_names
        return _TensorLayout(tuple(spec), self.device_mesh)
