"""A Keras `LayoutMap` that follows a resolved plan, and its verification."""

import math
import re

import keras
from keras.src.utils.jax_utils import is_in_jax_tracing_scope

from keras_nlp.distribution.activations import FREE
from keras_nlp.distribution.activations import current_batch_size
from keras_nlp.distribution.activations import current_sequence_length
from keras_nlp.distribution.activations import current_unpinned
from keras_nlp.distribution.backbone_planner import plan_backbone_layout
from keras_nlp.distribution.layout_errors import LayoutError
from keras_nlp.distribution.layout_errors import bullet_list
from keras_nlp.distribution.rules import format_spec
from keras_nlp.distribution.user_entries import UserEntry


def batch_axes_of(distribution):
    """The mesh axes `distribution` splits the batch over, as a tuple.

    Keras's `ModelParallel` names one (`batch_dim_name`); ours may name
    several (`batch_dim_names`); no distribution names none.
    """
    names = getattr(distribution, "batch_dim_names", None)
    if names is None:
        name = getattr(distribution, "batch_dim_name", None)
        names = (name,) if name else ()
    return tuple(names)


def active_layout_map():
    """The `BackboneLayoutMap` of the active distribution, or `None`."""
    distribution = keras.distribution.distribution()
    layout_map = getattr(distribution, "_layout_map", None)
    if isinstance(layout_map, BackboneLayoutMap):
        return layout_map
    return None


def layout_map_of(model, call, new_weights):
    """The active layout map that holds `model`'s plan.

    For calls that add weights to a model built under a layout map
    (`enable_lora`, `quantize`): they must run inside its scope.

    Raises:
        ValueError: naming `call` and what would not be sharded.
    """
    layout_map = active_layout_map()
    if layout_map is None or layout_map.plan is not model.layout_plan:
        raise ValueError(
            f"This {type(model).__name__} was built under a ModelParallel "
            f"layout; call {call} inside that distribution's scope so "
            f"{new_weights} are sharded like their kernels."
        )
    return layout_map


def bind_active_layout_map(backbone):
    """Binds the active distribution's layout map to `backbone`'s config,
    if it is one of ours and not bound yet.

    A task made in a distribution's scope around a backbone built in
    another (loaded under one distribution, generating under a new one)
    creates variables under this map: its optimizer's, its head's. An
    unbound map cannot lay them out and would raise; bound to the
    backbone it serves, it plans them as it would have. A map of another
    backbone class raises `LayoutError` here, naming both.
    """
    layout_map = active_layout_map()
    if layout_map is not None and layout_map.plan is None:
        layout_map.bind(type(backbone), backbone.get_config())


def _unconstrained():
    """JAX's `PartitionSpec.UNCONSTRAINED` (a dimension left to XLA)."""
    if keras.backend.backend() != "jax":
        return None
    import jax

    return jax.sharding.PartitionSpec.UNCONSTRAINED


def _activation_layout(activation, device_mesh, batch_axes):
    """A layout for an `ActivationPlan` (or a bare plan spec).

    `FREE` (the batch) becomes `batch_axes` when they divide the batch of
    the backbone call being traced, else `PartitionSpec.UNCONSTRAINED`.
    The plan's `sequence_axes` split dimension 1: the longest leading run
    of them whose product divides the sequence length of that call (none:
    it stays as the spec says).
    """
    spec = getattr(activation, "spec", activation)
    batch = _unconstrained()
    sizes = dict(zip(device_mesh.axis_names, device_mesh.shape, strict=True))
    batch_size = current_batch_size()
    if (
        batch_axes
        and batch_size
        and batch_size % math.prod(sizes[a] for a in batch_axes) == 0
    ):
        batch = batch_axes[0] if len(batch_axes) == 1 else tuple(batch_axes)
    axes = [batch if entry == FREE else entry for entry in spec]
    # The longest run of the sequence axes (context, then model) whose
    # product divides the traced length.
    sequence_axes = tuple(getattr(activation, "sequence_axes", ()))
    length = current_sequence_length()
    while sequence_axes and not (
        length and length % math.prod(sizes[a] for a in sequence_axes) == 0
    ):
        sequence_axes = sequence_axes[:-1]
    if sequence_axes:
        axes[1] = sequence_axes[0] if len(sequence_axes) == 1 else sequence_axes
    return _TensorLayout(tuple(axes), device_mesh)


def constrain(tensor, spec):
    """Pins `tensor` to a plan spec while JAX traces under a planned map.

    `spec` is a plan's spec (`FREE` for the batch, which goes on the batch
    axes where they divide the batch of the innermost `batch_size_scope`).
    Without an active `BackboneLayoutMap`, outside a JAX trace or on
    another backend, `tensor` is returned as it is.
    """
    layout_map = active_layout_map()
    if (
        layout_map is None
        or keras.backend.backend() != "jax"
        or not is_in_jax_tracing_scope()
    ):
        return tensor
    layout = _activation_layout(
        spec, layout_map.device_mesh, layout_map.batch_axes
    )
    return keras.distribution.distribute_tensor(tensor, layout)


def pin_input(layer, tensor):
    """Pins the input of `layer` where the plan has a layout for it.

    Keras pins layer outputs only; a projection's input is computed inside
    its parent layer (an attention's heads, a gated feed-forward's
    product), so the parent calls this just before the projection.
    Without a planned `<layer path>/input` (no sequence parallelism, no
    active map, another backend) `tensor` is returned as it is.
    """
    return pin_activation(layer, "input", tensor)


def pin_activation(layer, name, tensor):
    """Pins `tensor` to the plan's `<layer path>/<name>`, if planned.

    For tensors inside a layer that the plan lays out: a projection's
    `input`, an attention's `keys` and values (gathered over the context
    axis). Elsewhere `tensor` is returned as it is.
    """
    layout_map = active_layout_map()
    if layout_map is None or layer.path is None:
        return tensor
    activation = layout_map.activation(f"{layer.path}/{name}")
    if activation is None:
        return tensor
    return constrain(tensor, activation)


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
        names.discard(_unconstrained())
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

    Entries a user sets (`layout_map[regex_or_path] = ("model", None)`, as
    with any Keras `LayoutMap`) override the plan for the variables they
    match: they are checked like rules (rank, divisibility, mesh axis
    names), shown in the plan with decision `user`, and verified after the
    build. An entry that matches no variable is an error.

    Args:
        device_mesh: the `keras.distribution.DeviceMesh`.
        backbone_cls: the backbone class the map serves.
        request: the `PlanRequest` every plan of the map is made for.
        plan: the `LayoutPlan` to follow now, or `None` to bind later.

    Attributes:
        plan: the `LayoutPlan` the map follows, or `None` while unbound.
        backbone_cls: the backbone class the map serves.
        request: the `PlanRequest` (mesh, axes, strict, policy, ...).
        user_entries: the `UserEntry`s set on the map, in order.
    """

    def __init__(self, device_mesh, backbone_cls, request, plan=None):
        super().__init__(device_mesh)
        self.backbone_cls = backbone_cls
        self._planned_class = backbone_cls
        self.request = request
        self.plan = None
        self._activations = {}
        self._user_entries = {}
        # A map resolved eagerly (config=, preset= or an instance) is pinned
        # to those shapes; an unbound one follows whatever is built.
        self.pinned = plan is not None
        if plan is not None:
            self._install(plan)

    @property
    def batch_axes(self):
        """The mesh axes the active distribution splits the batch over."""
        return batch_axes_of(keras.distribution.distribution())

    @property
    def user_entries(self):
        return tuple(self._user_entries.values())

    def plan_for(self, backbone_cls, config):
        """Plans `backbone_cls(**config)` on this map's mesh and entries."""
        return plan_backbone_layout(
            backbone_cls,
            config,
            self.request,
            preset=self.plan.preset if self.plan else None,
            user_entries=self.user_entries,
        )

    def __setitem__(self, key, layout):
        if not isinstance(key, str):
            raise ValueError(
                f"Layout map keys are variable paths or regexes. Received: "
                f"{key!r}."
            )
        try:
            re.compile(key)
        except re.error as error:
            raise ValueError(
                f"The layout map key {key!r} is not a valid regex: {error}. "
                "Escape special characters to give an exact path."
            ) from None
        axes = getattr(layout, "axes", layout)
        if not isinstance(axes, (tuple, list)):
            raise ValueError(
                f"The layout set for {key!r} must be a tuple of mesh axis "
                "names (or None) per dimension, or a keras.distribution."
                f"TensorLayout. Received: {layout!r}."
            )
        spec = tuple(tuple(a) if isinstance(a, list) else a for a in axes)
        names = set(self.device_mesh.axis_names)
        for entry in spec:
            parts = entry if isinstance(entry, tuple) else (entry,)
            unknown = [a for a in parts if a is not None and a not in names]
            if unknown:
                raise ValueError(
                    f"The layout set for {key!r}, {format_spec(spec)}, names "
                    f"{unknown}, which are not axes of the mesh "
                    f"{list(self.device_mesh.axis_names)}."
                )
        previous = dict(self._user_entries)
        self._user_entries[key] = UserEntry(key, spec)
        self._replan(previous)

    def __delitem__(self, key):
        if key not in self._user_entries:
            raise KeyError(
                f"{key!r} is not an entry set on this layout map; the "
                f"entries set are {list(self._user_entries)}. Planned "
                "layouts cannot be deleted: override them instead."
            )
        previous = dict(self._user_entries)
        del self._user_entries[key]
        self._replan(previous)

    def _replan(self, previous_entries):
        """Re-resolves a resolved map after its user entries changed."""
        if self.plan is None:
            return  # checked when the map binds
        config = self.plan.config
        backbone_cls = self._planned_class
        try:
            self._install(self.plan_for(backbone_cls, config))
        except LayoutError:
            self._user_entries = previous_entries
            raise

    def _install(self, plan, backbone_cls=None):
        if backbone_cls is not None:
            self._planned_class = backbone_cls
        self._layout_map.clear()
        for weight in plan.weights:
            self._layout_map[weight.path] = _TensorLayout(
                weight.spec, self.device_mesh
            )
        self._activations = {
            activation.path: activation for activation in plan.activations
        }
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
        plan = self.plan_for(backbone_cls, config)
        if self.pinned:
            _check_same_shapes(self.plan, plan)
            return self.plan
        self._install(plan, backbone_cls)
        return plan

    def extend(self, plan, recreated=()):
        """Switches to `plan`, which may only add weights (LoRA adapters,
        quantization scales) and lay out anew the paths in `recreated`
        (int4 kernels, which Keras deletes and creates packed).

        Called by `Backbone.enable_lora` and `Backbone.quantize` before the
        new variables are created.
        """
        if self.plan is not None:
            old = {w.path: w for w in self.plan.weights}
            changed = [
                path
                for path, weight in old.items()
                if path not in {w.path for w in plan.weights}
                or (
                    plan.weight(path).spec != weight.spec
                    and path not in recreated
                )
            ]
            if changed:
                raise LayoutError(
                    "A plan extension may only add weights, but these "
                    "weights would change or disappear:\n"
                    + bullet_list(changed)
                )
        self._install(plan)

    def add_head(self, head_plan):
        """Lays out a task's head beside the backbone's plan, by exact path.

        A head's variables (a classifier's `logits/kernel`) are not the
        backbone's, so its plan is not part of the backbone's; the map
        holds them as well. Called by a task before it builds its head,
        and again after `enable_lora` (which reinstalls the backbone's
        plan).

        Args:
            head_plan: a `LayoutPlan` of the head's weights only.
        """
        for weight in head_plan.weights:
            self._layout_map[weight.path] = _TensorLayout(
                weight.spec, self.device_mesh
            )

    def activation(self, key):
        """The `ActivationPlan` of `key`, or `None` (none, or unpinned)."""
        if key in current_unpinned():
            return None
        return self._activations.get(key)

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
        if key in self._activations:
            if key in current_unpinned():
                return None
            # Keras asks while tracing (a sharding constraint) and in eager
            # calls (a copy to the layout): only the first may leave the
            # batch dimension to XLA.
            if keras.backend.backend() == "jax" and is_in_jax_tracing_scope():
                return _activation_layout(
                    self._activations[key], self.device_mesh, self.batch_axes
                )
            return None
        # Exact paths only: a miss means a layer output or a variable that is
        # not part of the backbone (caught by the post-build verification).
        return self._layout_map.get(key)

    def __repr__(self):
        state = (
            f"bound to {self.plan.preset or 'a config'}"
            if self.plan
            else "unbound"
        )
        request = self.request
        expert = "".join(
            f"{name}={axis!r} "
            for name, axis in (
                ("expert_axis", request.expert_axis),
                ("fsdp_axis", request.fsdp_axis),
            )
            if axis
        )
        return (
            f"<BackboneLayoutMap {self.backbone_cls.__name__} "
            f"model_axis={request.model_axis!r} "
            f"data_axis={request.data_axis!r} "
            f"{expert}{state}, {len(self)} layouts>"
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
    # Activation layouts apply to layer outputs by path: each must name a
    # layer of the model, or it would silently pin nothing.
    layer_paths = {layer.path for layer in model._flatten_layers()}
    for activation in plan.activations:
        layer_path = activation.path.rsplit("/", 1)[0]
        if layer_path not in layer_paths:
            problems.append(
                f"{activation.path}: an activation layout for a layer the "
                "model does not have"
            )
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
