"""What a layout plan is asked for: a mesh, an axis per role, how to choose.

A `PlanRequest` is made once, where a user's arguments come in
(`Backbone.plan_layout`, `Backbone.get_layout_map`, the command line), and
is checked there, in its constructor. Planning then passes it whole: the
backbone planner, the layout map, the resolver and the placement of each
weight read it and never check it again, so a new setting is one field
and its check here, not a parameter threaded through every layer.
"""

import dataclasses

from keras_nlp.distribution.cost import DEFAULT_TOKENS_PER_STEP
from keras_nlp.distribution.cost import CostModel
from keras_nlp.distribution.cost import check_tokens_per_step
from keras_nlp.distribution.layout_plan import dtype_itemsize
from keras_nlp.distribution.mesh import MeshShape
from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import role_axes_for

POLICIES = ("auto", "memory", "communication")
SEQUENCE_PARALLEL_OPTIONS = ("auto", True, False)
# The axis name that takes the experts when the caller names none.
DEFAULT_EXPERT_AXIS = "expert"
# The axis name that takes the context role when the caller names none.
DEFAULT_CONTEXT_AXIS = "context"


@dataclasses.dataclass(frozen=True)
class PlanRequest:
    """A checked request for a layout plan: the mesh, its roles' axes and
    how axes that do not divide a dimension are placed.

    The axes are the resolved ones: `expert_axis` is `None` when experts go
    on the model axis. `from_arguments` turns the public keyword arguments
    of `get_layout_map` / `plan_layout` into a request, choosing the mesh's
    `"expert"` axis when none is named.

    Later settings (a per-device memory budget the policy must meet)
    become fields here, checked in `__post_init__`, so no signature
    between the user and the resolver changes.

    Attributes:
        mesh: the `MeshShape` (a `DeviceMesh`, dict or `"2x4"` string is
            converted).
        model_axis: mesh axis of the `MODEL` role.
        data_axis: mesh axis of the `DATA` role, or `None` to shard no
            weight on a data axis.
        expert_axis: mesh axis of the `EXPERT` role, or `None` to put
            experts on the model axis. Weights with no expert dimension
            also shard their `DATA` dimensions over it.
        fsdp_axis: mesh axis that shards the `DATA` (FSDP) dimensions of
            weights instead of the data axis, or `None`.
        strict: bool. If `True`, any fallback to replication raises, and
            so does an expert axis that does not divide the experts.
        policy: `"auto"`, `"memory"` or `"communication"`: how an axis that
            does not divide its dimension is placed (see
            `Backbone.get_layout_map`).
        tokens_per_step: int, tokens of one training step over all devices,
            which the collectives' estimates scale with.
        dtype: optional dtype name to count bytes in; `None` counts each
            variable in its own dtype.
        cost_model: an optional `keras_nlp.distribution.cost.CostModel` for
            the other assumptions of the estimates (training, optimizer
            moments, bandwidths); its `tokens_per_step` is replaced by the
            request's.
        context_axis: mesh axis of the `CONTEXT` role (context
            parallelism: the sequence of every activation split over it,
            keys and values gathered for attention), or `None`. Weights
            shard FSDP-style over it.
        sequence_parallel: `"auto"`, `True` or `False`: split the residual
            stream over the sequence on the model axis between the
            tensor-parallel projections (Megatron's sequence parallelism).
            `"auto"` lets the cost model choose (see
            `cost.choose_sequence_parallel`).

    Example:

    ```python
    from keras_nlp.distribution import PlanRequest

    request = PlanRequest({"batch": 2, "model": 4}, policy="memory")
    request.batch_axes  # ("batch",)
    ```
    """

    mesh: MeshShape
    model_axis: str = "model"
    data_axis: str = "batch"
    expert_axis: str = None
    fsdp_axis: str = None
    strict: bool = False
    policy: str = "auto"
    tokens_per_step: int = DEFAULT_TOKENS_PER_STEP
    dtype: str = None
    cost_model: CostModel = None
    sequence_parallel: object = "auto"
    context_axis: str = None

    def __post_init__(self):
        # A frozen dataclass sets a converted field through object.
        object.__setattr__(self, "mesh", MeshShape.from_mesh(self.mesh))
        _check_role_axes(
            self.mesh, self.model_axis, self.data_axis, self.expert_axis
        )
        _check_fsdp_axis(self)
        _check_context_axis(self)
        if self.policy not in POLICIES:
            raise ValueError(
                f"policy must be one of {', '.join(map(repr, POLICIES))}. "
                f"Received: policy={self.policy!r}."
            )
        check_tokens_per_step(self.tokens_per_step)
        if not any(
            self.sequence_parallel is option
            or (isinstance(option, str) and self.sequence_parallel == option)
            for option in SEQUENCE_PARALLEL_OPTIONS
        ):
            raise ValueError(
                "sequence_parallel must be 'auto' (the cost model chooses), "
                "True or False. Received: "
                f"sequence_parallel={self.sequence_parallel!r}."
            )
        if self.dtype is not None:
            # Fails now, naming the dtype, rather than when bytes are shown.
            dtype_itemsize(self.dtype)

    @classmethod
    def from_arguments(
        cls,
        mesh,
        *,
        model_parallel_dim_name="model",
        data_parallel_dim_name="batch",
        expert_parallel_dim_name=None,
        fsdp_dim_name=None,
        context_parallel_dim_name=None,
        **settings,
    ):
        """The request of `get_layout_map` / `plan_layout`'s arguments.

        Args:
            mesh: a `DeviceMesh`, `MeshShape`, dict of axis sizes or string.
            model_parallel_dim_name: the `MODEL` role's axis.
            data_parallel_dim_name: the `DATA` role's axis, or `None`.
            expert_parallel_dim_name: the `EXPERT` role's axis; `None`
                takes the mesh's `"expert"` axis if it has one (and it is
                not the model or data axis), else the model axis. Naming
                the model axis puts the experts there.
            fsdp_dim_name: the axis that shards weights FSDP-style, or
                `None`.
            context_parallel_dim_name: the `CONTEXT` role's axis; `None`
                takes the mesh's `"context"` axis if it has one (and no
                other role names it).
            **settings: the other fields (`strict`, `policy`,
                `tokens_per_step`, `dtype`, ...).
        """
        mesh = MeshShape.from_mesh(mesh)
        expert_axis = expert_parallel_dim_name
        if expert_axis is None and DEFAULT_EXPERT_AXIS in mesh.axis_names:
            if DEFAULT_EXPERT_AXIS not in (
                model_parallel_dim_name,
                data_parallel_dim_name,
            ):
                expert_axis = DEFAULT_EXPERT_AXIS
        context_axis = context_parallel_dim_name
        if context_axis is None and DEFAULT_CONTEXT_AXIS in mesh.axis_names:
            if DEFAULT_CONTEXT_AXIS not in (
                model_parallel_dim_name,
                data_parallel_dim_name,
                expert_axis,
                fsdp_dim_name,
            ):
                context_axis = DEFAULT_CONTEXT_AXIS
        # Experts named onto the model axis share it, as with no expert
        # axis; the constructor checks every axis.
        if expert_axis == model_parallel_dim_name:
            expert_axis = None
        return cls(
            mesh,
            model_axis=model_parallel_dim_name,
            data_axis=data_parallel_dim_name,
            expert_axis=expert_axis,
            fsdp_axis=fsdp_dim_name,
            context_axis=context_axis,
            **settings,
        )

    def dtype_of(self, variable):
        """The dtype `variable`'s bytes are counted in."""
        return self.dtype or variable.dtype

    @property
    def divisor_bound(self):
        """The largest axis size a fallback's reason suggests."""
        return max(64, self.mesh.num_devices)

    @property
    def role_axes(self):
        """The mesh axes of each role (see `rules.role_axes_for`)."""
        return role_axes_for(
            self.model_axis,
            self.data_axis,
            self.expert_axis,
            self.fsdp_axis,
            self.context_axis,
        )

    @property
    def batch_axes(self):
        """The axes that split the batch: the data and the fsdp axis."""
        return tuple(
            axis
            for axis in (self.data_axis, self.fsdp_axis)
            if axis is not None
        )

    @property
    def token_axes(self):
        """The axes that split the tokens: the batch axes and the context
        axis (each device computes the tokens of its own slice)."""
        return self.batch_axes + tuple(
            a for a in (self.context_axis,) if a is not None
        )

    @property
    def fsdp_axes(self):
        """The axes that shard weights FSDP-style (the `DATA` role's)."""
        return self.role_axes[DATA]

    @property
    def costs(self):
        """The `CostModel` the candidates are scored with."""
        return dataclasses.replace(
            self.cost_model or CostModel(),
            tokens_per_step=self.tokens_per_step,
        )


def _check_role_axes(mesh, model_axis, data_axis, expert_axis):
    """Raises unless the roles name distinct axes of `mesh`.

    The data and expert axes may be `None`; the expert axis may be the
    model axis (experts share it).
    """
    names = list(mesh.axis_names)
    if model_axis not in names:
        raise ValueError(
            f"model_parallel_dim_name={model_axis!r} is not an axis of "
            f"the device mesh. The mesh's axis names are {names}."
        )
    if data_axis is not None and data_axis not in names:
        raise ValueError(
            f"data_parallel_dim_name={data_axis!r} is not an axis of the "
            f"device mesh. The mesh's axis names are {names} (or pass "
            "data_parallel_dim_name=None to shard no weight on a data "
            "axis)."
        )
    if model_axis == data_axis:
        raise ValueError(
            "model_parallel_dim_name and data_parallel_dim_name must name "
            f"different mesh axes; both are {model_axis!r}. The mesh's "
            f"axis names are {names}."
        )
    if expert_axis is None:
        return
    if expert_axis not in names:
        raise ValueError(
            f"expert_parallel_dim_name={expert_axis!r} is not an axis of the "
            f"device mesh. The mesh's axis names are {names} (or pass "
            "expert_parallel_dim_name=None to put experts on the model "
            "axis)."
        )
    if expert_axis == data_axis:
        raise ValueError(
            "expert_parallel_dim_name and data_parallel_dim_name must name "
            f"different mesh axes; both are {expert_axis!r}. The mesh's "
            f"axis names are {names}."
        )


def _check_fsdp_axis(request):
    """Raises unless the fsdp axis (or `None`) is a mesh axis of its own."""
    _check_own_axis(
        request,
        "fsdp_dim_name",
        request.fsdp_axis,
        "to shard weights FSDP-style over the data axis",
    )


def _check_context_axis(request):
    """Raises unless the context axis (or `None`) is a mesh axis of its
    own."""
    _check_own_axis(
        request,
        "context_parallel_dim_name",
        request.context_axis,
        "for no context parallelism",
    )


def _check_own_axis(request, argument, axis, without):
    """Raises unless `axis` (`argument`'s, or `None`) is a mesh axis no
    other role names; `without` says what `None` would mean."""
    if axis is None:
        return
    names = list(request.mesh.axis_names)
    if axis not in names:
        raise ValueError(
            f"{argument}={axis!r} is not an axis of the device mesh. The "
            f"mesh's axis names are {names} (or pass {argument}=None "
            f"{without})."
        )
    for role, other in (
        ("model_parallel_dim_name", request.model_axis),
        ("data_parallel_dim_name", request.data_axis),
        ("expert_parallel_dim_name", request.expert_axis),
        ("fsdp_dim_name", request.fsdp_axis),
        ("context_parallel_dim_name", request.context_axis),
    ):
        if role != argument and axis == other:
            raise ValueError(
                f"{argument} and {role} must name different mesh axes; both "
                f"are {axis!r}. The mesh's axis names are {names}."
            )
