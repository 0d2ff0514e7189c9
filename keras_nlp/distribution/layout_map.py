"""A Keras `LayoutMap` that follows a resolved plan, and its verification."""

import keras

from keras_nlp.distribution.resolver import LayoutError
from keras_nlp.distribution.resolver import bullet_list
from keras_nlp.distribution.rules import format_spec


class _TensorLayout(keras.distribution.TensorLayout):
    """`TensorLayout` that accepts a tuple of axis names on one dimension.

    Keras's own validation only knows single axis names per dimension, while
    JAX (and our plans) allow one dimension to be split over several axes.
    """

    def _validate_axes(self):
        if self._device_mesh is None:
            return
        names = set()
        for entry in self._axes:
            names.update(entry if isinstance(entry, tuple) else (entry,))
        names.discard(None)
        unknown = names - set(self._device_mesh.axis_names)
        if unknown:
            raise ValueError(
                f"Layout axes {sorted(unknown)} are not in the mesh axis "
                f"names {list(self._device_mesh.axis_names)}."
            )


class BackboneLayoutMap(keras.distribution.LayoutMap):
    """A `LayoutMap` holding one exact layout per variable of a backbone.

    Made by `Backbone.get_layout_map`. Keys are exact variable paths taken
    from a `LayoutPlan`, so no two keys ever match one path and nothing is
    replicated by accident. A map made from the class alone is *unbound*: it
    binds to the config of the backbone built inside the distribution scope,
    before that backbone creates any variable.

    Attributes:
        plan: the `LayoutPlan` the map follows, or `None` while unbound.
        backbone_cls: the backbone class the map serves.
    """

    def __init__(
        self,
        device_mesh,
        backbone_cls,
        *,
        model_axis,
        data_axis,
        strict=False,
        plan=None,
    ):
        super().__init__(device_mesh)
        self.backbone_cls = backbone_cls
        self.model_axis = model_axis
        self.data_axis = data_axis
        self.strict = strict
        self.plan = None
        # A map resolved eagerly (config=, preset= or an instance) is pinned
        # to those shapes; an unbound one follows whatever is built.
        self.pinned = plan is not None
        if plan is not None:
            self._install(plan)

    def _install(self, plan):
        self._layout_map.clear()
        for weight in plan.weights:
            self._layout_map[weight.path] = _TensorLayout(
                weight.spec, self.device_mesh
            )
        self.plan = plan

    def bind(self, backbone_cls, config):
        """Resolves the map for a backbone about to be built.

        Called by `Backbone` before the backbone creates its variables.

        Returns:
            The `LayoutPlan` the backbone must follow.
        """
        if not issubclass(backbone_cls, self.backbone_cls):
            raise LayoutError(
                f"This layout map was made by "
                f"{self.backbone_cls.__name__}.get_layout_map, but a "
                f"{backbone_cls.__name__} is being built in its distribution "
                f"scope. Use {backbone_cls.__name__}.get_layout_map(mesh) "
                "(or keras_nlp.models.Backbone.get_layout_map(mesh) for any "
                "backbone)."
            )
        plan = backbone_cls.plan_layout(
            self.device_mesh,
            config=config,
            model_parallel_dim_name=self.model_axis,
            data_parallel_dim_name=self.data_axis,
            strict=self.strict,
        )
        if self.pinned:
            _check_same_shapes(self.plan, plan)
            return self.plan
        self._install(plan)
        return plan

    def extend(self, plan):
        """Switches to `plan`, which may only add weights (LoRA adapters).

        Called by `Backbone.enable_lora` before the adapters are created.
        """
        if self.plan is not None:
            old = {w.path: w for w in self.plan.weights}
            changed = [
                path
                for path, weight in old.items()
                if path not in {w.path for w in plan.weights}
                or plan.weight(path).spec != weight.spec
            ]
            if changed:
                raise LayoutError(
                    "A plan extension may only add weights, but these "
                    "weights would change or disappear:\n"
                    + bullet_list(changed)
                )
        self._install(plan)

    def __getitem__(self, key):
        if self.plan is None:
            if key.endswith("/output"):
                # Keras also asks for layouts of layer outputs; we leave
                # activations to XLA.
                return None
            raise LayoutError(
                f"Keras asked for the layout of {key!r}, but this layout map "
                f"from {self.backbone_cls.__name__}.get_layout_map(mesh) is "
                "not bound to a config yet. It binds when a "
                f"{self.backbone_cls.__name__} is built inside the "
                "distribution's scope; to use it for other variables, pass "
                "config= or preset= to get_layout_map."
            )
        # Exact paths only: a miss means a layer output or a variable that is
        # not part of the backbone (caught by the post-build verification).
        return self._layout_map.get(key)

    def __repr__(self):
        state = (
            f"bound to {self.plan.preset or 'a config'}"
            if self.plan
            else "unbound"
        )
        return (
            f"<BackboneLayoutMap {self.backbone_cls.__name__} "
            f"model_axis={self.model_axis!r} data_axis={self.data_axis!r} "
            f"{state}, {len(self)} layouts>"
        )


def _check_same_shapes(pinned, requested):
    old = {w.path: w.shape for w in pinned.weights}
    new = {w.path: w.shape for w in requested.weights}
    if old == new:
        return
    lines = []
    for path in sorted(set(old) | set(new)):
        if old.get(path) != new.get(path):
            lines.append(
                f"{path}: planned {old.get(path, 'absent')}, "
                f"built {new.get(path, 'absent')}"
            )
    raise LayoutError(
        "This layout map was resolved for another config than the backbone "
        "being built in its scope:\n"
        + bullet_list(lines)
        + "\nCall get_layout_map(mesh) without config= or preset= to follow "
        "whatever is built, or pass the config you build."
    )


def verify_layouts(model, plan, device_mesh):
    """Checks that every variable of a built model is sharded as planned.

    Keras may swallow a layout error raised during a symbolic build and
    leave a weight whole on one device; this catches that and any other
    drift between plan and reality. Only JAX shards variables, so on other
    backends there is nothing to check.

    Args:
        model: the built `keras.Model`.
        plan: its `LayoutPlan`.
        device_mesh: the `keras.distribution.DeviceMesh` it was built on.

    Raises:
        LayoutError: listing every variable whose sharding, shape or presence
            differs from the plan.
    """
    if keras.backend.backend() != "jax":
        return
    planned = {weight.path: weight for weight in plan.weights}
    problems = []
    seen = set()
    for variable in model.weights:
        seen.add(variable.path)
        weight = planned.get(variable.path)
        if weight is None:
            problems.append(f"{variable.path}: not in the plan")
            continue
        if tuple(variable.shape) != weight.shape:
            problems.append(
                f"{variable.path}: shape {tuple(variable.shape)}, planned "
                f"{weight.shape}"
            )
            continue
        expected = _TensorLayout(weight.spec, device_mesh).backend_layout
        actual = getattr(variable.value, "sharding", None)
        if actual is None or not actual.is_equivalent_to(
            expected, len(weight.shape)
        ):
            problems.append(
                f"{variable.path}: planned {format_spec(weight.spec)}, "
                f"actual {_describe_sharding(actual)}"
            )
    for path in planned:
        if path not in seen:
            problems.append(f"{path}: planned but not built")
    if problems:
        raise LayoutError(
            f"{type(model).__name__} was built, but its variables do not "
            "follow the layout plan:\n"
            + bullet_list(problems)
            + "\nKeras can catch a sharding error during a symbolic build "
            "and leave a weight on one device; rebuild inside "
            "distribution.scope() with the map from get_layout_map."
        )


def _describe_sharding(sharding):
    if sharding is None:
        return "no sharding"
    spec = getattr(sharding, "spec", None)
    if spec is not None:
        return f"{type(sharding).__name__}{tuple(spec)}"
    devices = getattr(sharding, "device_set", set())
    return f"{type(sharding).__name__} on {len(devices)} device(s)"
