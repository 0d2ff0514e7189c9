"""What every backbone constructor does besides building its layers.

`Backbone.__init_subclass__` wraps each subclass's `__init__` with
`backbone_constructor`: the outermost constructor of a call records its
arguments (the config), binds the active layout map before any variable
exists, adds LoRA adapters, and checks the built variables against the
layout plan.
"""

import functools
import inspect
import re
import threading

from keras_nlp.distribution.capacity import check_allocatable
from keras_nlp.distribution.layout_map import active_layout_map
from keras_nlp.distribution.layout_map import verify_layouts
from keras_nlp.layers.remat import keep_remat_to_blocks
from keras_nlp.models.lora import LORA_CONFIG_KEYS
from keras_nlp.saving.huggingface.field_checks import MAX_EXPERTS
from keras_nlp.saving.huggingface.field_checks import MAX_LAYERS
from keras_nlp.saving.huggingface.field_checks import MAX_POSITIONS
from keras_nlp.saving.huggingface.field_checks import MAX_SIZE

# How deep in nested backbone constructors this thread is: only the
# outermost constructor of a call binds a layout and records its config.
_construction = threading.local()
# Config keys every Keras model has; the base class writes them itself.
MODEL_CONFIG_KEYS = ("name", "trainable", "dtype")
# Arguments named like these are sizes: positive integers (or None).
_SIZE_ARGUMENT = re.compile(
    r"(num_\w+|\w+_dim|vocabulary_size|\w+_size|\w+_length|top_k"
    r"|sliding_window)"
)
# The bounds Hugging Face configs get (`field_checks`), by argument name.
_SIZE_LIMITS = (
    (re.compile(r"(\w+_)?num_(\w+_)?layers|num_groups"), MAX_LAYERS),
    (re.compile(r"num_experts|top_k"), MAX_EXPERTS),
    (
        re.compile(r"\w*sequence_length|(\w+_)?sliding_window\w*"),
        MAX_POSITIONS,
    ),
)


def _check_arguments(cls, init, kwargs):
    """Unknown keywords and malformed sizes, named as the user wrote them."""
    parameters = inspect.signature(init).parameters
    known = [
        name
        for name, parameter in parameters.items()
        if name != "self" and parameter.kind is not parameter.VAR_KEYWORD
    ]
    valid = [*known, *MODEL_CONFIG_KEYS, *LORA_CONFIG_KEYS]
    unknown = sorted(set(kwargs) - set(valid))
    if unknown:
        raise TypeError(
            f"{cls.__name__} got unknown argument(s) {unknown}. Its "
            f"arguments are: {', '.join(dict.fromkeys(valid))}."
        )


def _check_sizes(cls, init, arguments):
    parameters = inspect.signature(init).parameters
    for name, value in arguments.items():
        parameter = parameters.get(name)
        if parameter is None or not _SIZE_ARGUMENT.fullmatch(name):
            continue
        # `None` is valid where the default is, or the annotation says so
        # (`sliding_window: int | None = 512`).
        nullable = parameter.default is None or "None" in str(
            parameter.annotation
        )
        if value is None and nullable:
            continue
        # `0` is valid where it is the default (Gemma 4's
        # `num_kv_shared_layers=0`: no block shares).
        if value == 0 and parameter.default == 0 and type(value) is int:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            allowed = " or None" if nullable else ""
            raise ValueError(
                f"{cls.__name__}: `{name}` must be a positive integer"
                f"{allowed}. Received: {name}={value!r}."
            )
        limit = _size_limit(name)
        if value > limit:
            raise ValueError(
                f"{cls.__name__}: `{name}` is at most {limit}, far above "
                "every published checkpoint (a larger one would take "
                f"forever to build or plan). Received: {name}={value!r}."
            )


def _size_arguments(arguments):
    """The config's size arguments that are set: name -> positive int."""
    return {
        name: value
        for name, value in arguments.items()
        if _SIZE_ARGUMENT.fullmatch(name)
        and isinstance(value, int)
        and not isinstance(value, bool)
    }


def _size_limit(name):
    """The largest value a size argument named `name` may take."""
    for pattern, limit in _SIZE_LIMITS:
        if pattern.fullmatch(name):
            return limit
    return MAX_SIZE


def check_heads_divide(hidden_dim, num_heads, heads_argument="num_heads"):
    """Raises a `ValueError` unless `hidden_dim` splits into the heads.

    That every size is a positive integer `Backbone` checks for every
    backbone, before its constructor runs.

    Args:
        hidden_dim: int.
        num_heads: int.
        heads_argument: the backbone's name for `num_heads`, as the message
            calls it.
    """
    if hidden_dim % num_heads:
        raise ValueError(
            f"`hidden_dim` must be divisible by `{heads_argument}` (each "
            f"head is hidden_dim // {heads_argument} wide). Received: "
            f"hidden_dim={hidden_dim}, {heads_argument}={num_heads}."
        )


def check_dropout_rate(dropout):
    """Raises a `ValueError` unless `dropout` is a rate in `[0, 1)`."""
    if not 0 <= dropout < 1:
        raise ValueError(
            f"`dropout` must be in [0, 1). Received: dropout={dropout!r}."
        )


# The GELUs of `hidden_activation`: tanh-approximated (keras-hub's default)
# and exact (erf-based, Hugging Face's `"gelu"`).
GELU_ACTIVATIONS = ("gelu_approximate", "gelu")


def check_gelu(hidden_activation):
    """Raises a `ValueError` unless `hidden_activation` is a GELU of
    `GELU_ACTIVATIONS`."""
    if hidden_activation not in GELU_ACTIVATIONS:
        raise ValueError(
            "`hidden_activation` must be one of "
            f"{', '.join(map(repr, GELU_ACTIVATIONS))}. Received: "
            f"hidden_activation={hidden_activation!r}."
        )


# The arguments that most backbones name alike and pass on as they are to
# their family builder (see `builder_from`).
COMMON_ARGUMENTS = (
    "vocabulary_size",
    "num_layers",
    "num_heads",
    "hidden_dim",
    "intermediate_dim",
    "dropout",
    "dtype",
)


def builder_from(builder, names):
    """`builder` taking a backbone constructor's own arguments.

    Returns `build(backbone, arguments, **options)`: it calls
    `builder(backbone, ...)` with, of the constructor's `locals()`
    (`arguments`), those of `names` it has and its `**kwargs`, and the
    member's own `options`. A local variable must not reuse one of `names`.

    Args:
        builder: a family builder, `build_*_style(backbone, **arguments)`.
        names: the arguments its members name alike.
    """

    def build(backbone, arguments, **options):
        shared = {name: arguments[name] for name in names if name in arguments}
        builder(backbone, **shared, **options, **arguments["kwargs"])

    return build


def check_no_router_logits(owner, output_router_logits, loss_argument=None):
    """Raises unless `output_router_logits` is false.

    keras-hub's mixture-of-experts backbones take the argument; ours output
    hidden states only, and add the router's load-balancing loss in
    training (weighted by `loss_argument`, when the model has one).
    """
    if not output_router_logits:
        return
    loss = (
        ", and the router's load-balancing loss is added in training with "
        f"`{loss_argument}`"
        if loss_argument
        else ""
    )
    raise ValueError(
        f"{owner} does not output router logits: its output is the hidden "
        f"states{loss}. Received: output_router_logits="
        f"{output_router_logits!r}."
    )


def _constructor_arguments(init, instance, args, kwargs):
    """The arguments of a constructor call, defaults applied, as a dict."""
    signature = inspect.signature(init)
    bound = signature.bind(instance, *args, **kwargs)
    bound.apply_defaults()
    arguments = {}
    for index, (name, parameter) in enumerate(signature.parameters.items()):
        if index == 0:
            continue
        value = bound.arguments.get(name)
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            arguments.update(value or {})
        elif parameter.kind is not inspect.Parameter.VAR_POSITIONAL:
            arguments[name] = value
    return arguments


def backbone_constructor(init):
    """Wraps a backbone `__init__` with what every backbone shares.

    The outermost constructor of a call records its arguments (they are the
    config), binds the active layout map before any variable exists, adds
    LoRA adapters, and checks the built variables against the layout plan.
    """

    @functools.wraps(init)
    def __init__(self, *args, verify_layout=True, **kwargs):
        depth = getattr(_construction, "depth", 0)
        if depth:
            return init(self, *args, **kwargs)
        _check_arguments(type(self), init, kwargs)
        arguments = _constructor_arguments(init, self, args, kwargs)
        _check_sizes(type(self), init, arguments)
        layout_map = active_layout_map()
        plan = None
        if layout_map is not None:
            plan = layout_map.bind(type(self), arguments)
        check_allocatable(
            type(self),
            arguments,
            _size_arguments(arguments),
            plan,
            None if layout_map is None else layout_map.device_mesh,
        )
        lora = {key: kwargs.pop(key, None) for key in LORA_CONFIG_KEYS}
        _construction.depth = 1
        try:
            init(self, *args, **kwargs)
        finally:
            _construction.depth = 0
        keep_remat_to_blocks(self)
        self._constructor_config = {
            key: value
            for key, value in arguments.items()
            if key not in LORA_CONFIG_KEYS
        }
        for key, value in self._constructor_config.items():
            if key not in MODEL_CONFIG_KEYS and not hasattr(self, key):
                setattr(self, key, value)
        if lora["lora_rank"]:
            self._add_lora_adapters(
                lora["lora_rank"], lora["lora_target_names"]
            )
        if plan is not None:
            # A backbone built from a preset has no values yet: the loader
            # verifies once it has filled them.
            if verify_layout:
                verify_layouts(self, plan, layout_map.device_mesh)
            self._layout_plan = plan

    __init__.is_backbone_constructor = True
    # Keras reads constructor arguments with getfullargspec, which ignores
    # __wrapped__ but honours __signature__.
    __init__.__signature__ = inspect.signature(init)
    return __init__
