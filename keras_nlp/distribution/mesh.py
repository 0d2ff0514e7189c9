"""Mesh shapes: planning needs axis names and sizes, never devices."""

import math

import keras

# Axis names of a mesh written as sizes only ("2x4", "1x4x2").
DEFAULT_AXIS_NAMES = {
    2: ("batch", "model"),
    3: ("batch", "expert", "model"),
}


def _count(number, singular, plural):
    """`1 axis`, `2 axes`: a count with its noun."""
    return f"{number} {singular if number == 1 else plural}"


class MeshShape:
    """Axis names and sizes of a device mesh, with no devices attached.

    Plans are computed from this alone, so a layout for 256 accelerators can
    be checked on a laptop.

    Args:
        shape: tuple of ints, the size of each mesh axis.
        axis_names: tuple of str, one name per axis.

    Example:

    ```python
    from keras_nlp.distribution import MeshShape

    mesh = MeshShape((1, 2), ("batch", "model"))
    mesh.size("model")  # 2
    MeshShape.parse("2x4").axis_sizes  # {"batch": 2, "model": 4}
    MeshShape.parse("1x4x2").axis_names  # ("batch", "expert", "model")
    ```
    """

    def __init__(self, shape, axis_names=("batch", "model")):
        shape = tuple(shape)
        axis_names = tuple(axis_names)
        if len(shape) != len(axis_names):
            raise ValueError(
                f"A mesh shape {shape} needs one axis name per axis; "
                f"received axis_names={axis_names}."
            )
        for size in shape:
            if not isinstance(size, int) or isinstance(size, bool) or size < 1:
                raise ValueError(
                    f"Mesh axis sizes must be positive integers. "
                    f"Received shape={shape}."
                )
        if len(set(axis_names)) != len(axis_names):
            raise ValueError(
                f"Mesh axis names must be distinct. "
                f"Received axis_names={axis_names}."
            )
        self.shape = shape
        self.axis_names = axis_names

    @classmethod
    def from_mesh(cls, mesh):
        """A `MeshShape` from a `DeviceMesh`, a `MeshShape`, a dict or "2x4".

        A string names (batch, model) sizes, as on the command line.
        """
        if isinstance(mesh, MeshShape):
            return mesh
        if isinstance(mesh, str):
            return cls.parse(mesh)
        if isinstance(mesh, keras.distribution.DeviceMesh):
            return cls(tuple(mesh.shape), tuple(mesh.axis_names))
        if isinstance(mesh, dict):
            return cls(tuple(mesh.values()), tuple(mesh.keys()))
        raise ValueError(
            "Expected a keras.distribution.DeviceMesh, a MeshShape, a dict "
            "of axis name -> size or a 'BATCHxMODEL' string. Received an "
            f"object of type {type(mesh).__name__}: {mesh!r}."
        )

    @classmethod
    def parse(cls, text, axis_names=None):
        """Parses `"1x2"` into a mesh with the given axis names.

        Without `axis_names`, two sizes are `(batch, model)` and three are
        `(batch, expert, model)`.
        """
        parts = str(text).lower().split("x")
        try:
            shape = tuple(int(part) for part in parts)
        except ValueError:
            raise ValueError(
                f"Could not read the mesh shape {text!r}. Write one size per "
                "axis joined by 'x', e.g. '1x2' for axes (batch, model) or "
                "'1x4x2' for (batch, expert, model)."
            ) from None
        axes = _count(len(shape), "axis", "axes")
        if axis_names is None:
            axis_names = DEFAULT_AXIS_NAMES.get(len(shape))
            if axis_names is None:
                raise ValueError(
                    f"The mesh shape {text!r} has {axes}; pass one axis "
                    "name per size (axis_names, or --axis-names on the "
                    "command line), or write 2 sizes for (batch, model) or "
                    "3 for (batch, expert, model)."
                )
        if len(shape) != len(axis_names):
            raise ValueError(
                f"The mesh shape {text!r} has {axes} but "
                f"{_count(len(axis_names), 'axis name was', 'axis names were')}"
                f" given: {axis_names}. Give one name per size."
            )
        for size, name in zip(shape, axis_names, strict=True):
            if size < 1:
                raise ValueError(
                    f"The mesh shape {text!r} gives axis {name!r} size "
                    f"{size}; every axis needs at least 1 device, e.g. "
                    "'1x2' for (batch, model)."
                )
        return cls(shape, axis_names)

    @property
    def axis_sizes(self):
        return dict(zip(self.axis_names, self.shape, strict=True))

    @property
    def num_devices(self):
        return math.prod(self.shape)

    def size(self, axis_name):
        return self.axis_sizes[axis_name]

    def __eq__(self, other):
        return (
            isinstance(other, MeshShape)
            and self.shape == other.shape
            and self.axis_names == other.axis_names
        )

    def __hash__(self):
        return hash((self.shape, self.axis_names))

    def __str__(self):
        return "x".join(str(size) for size in self.shape) + (
            " (" + ", ".join(self.axis_names) + ")"
        )

    def __repr__(self):
        return f"MeshShape({self.shape}, {self.axis_names})"
