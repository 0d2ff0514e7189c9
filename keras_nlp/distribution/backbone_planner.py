"""Planning a backbone's layout: config -> abstract variables -> plan.

The one path from a backbone class and a config to a `LayoutPlan`, used
by `Backbone.plan_layout`, `Backbone.get_layout_map` and the layout map
when it binds to the backbone being built. Nothing is allocated: the
variables come from an abstract build (see `abstract_build`), and so do
the layer outputs whose layouts the plan pins (see `activations`) and
the key/value caches of cached decoding (see `kv_cache`).
"""

import dataclasses
import json

import keras

from keras_nlp.distribution.activations import FREE
from keras_nlp.distribution.activations import ActivationPlan
from keras_nlp.distribution.activations import plan_activations
from keras_nlp.distribution.cost import choose_sequence_parallel
from keras_nlp.distribution.kv_cache import AttentionCache
from keras_nlp.distribution.kv_cache import plan_kv_caches
from keras_nlp.distribution.layout_plan import dtype_itemsize
from keras_nlp.distribution.quantizable import QuantizableLayer
from keras_nlp.distribution.quantizable import quantized_by_keras
from keras_nlp.distribution.quantizable import quantized_policies
from keras_nlp.distribution.quantized import DEFAULT_INT4_BLOCK_SIZE
from keras_nlp.distribution.quantized import check_planned_mode
from keras_nlp.distribution.quantized import plan_quantized_config
from keras_nlp.distribution.resolver import resolve_layout
from keras_nlp.distribution.rules import normalize_rules
from keras_nlp.distribution.shapes import abstract_build

_CACHE = {}
_CACHE_SIZE = 64
# Why a backbone's sequence cannot be split (`sequence_splittable`).
_NOT_ONE_SEQUENCE = (
    "its residual stream is not one sequence as long as its token ids "
    "(image tokens join it, or its encoder and decoder differ in length)"
)


def backbone_variables(backbone_cls, config):
    """The `VariableInfo`s of `backbone_cls(**config)`, built abstractly.

    The build runs with no distribution active, so it binds no layout map
    and allocates nothing. Results are cached per class and config.
    """
    return _abstract_backbone(backbone_cls, config)[0]


def backbone_layers(backbone_cls, config):
    """The `LayerOutput`s of `backbone_cls(**config)`, built abstractly."""
    return _abstract_backbone(backbone_cls, config)[1]


def _abstract_backbone(backbone_cls, config):
    key = (backbone_cls, json.dumps(config, sort_keys=True, default=repr))
    if key in _CACHE:
        return _CACHE[key]
    # An explicit name keeps the abstract build from taking the auto name
    # ("gemma_backbone") that the real build should get.
    abstract_config = {**config, "name": config.get("name") or "abstract"}
    previous = keras.distribution.distribution()
    keras.distribution.set_distribution(None)
    try:
        built = abstract_build(
            lambda: backbone_cls.from_config(abstract_config)
        )
    finally:
        keras.distribution.set_distribution(previous)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = built
    return built


def plan_backbone_layout(
    backbone_cls, config, request, *, preset=None, user_entries=()
):
    """Resolves `backbone_cls._layout_rules(config)` for its real shapes.

    Args:
        backbone_cls: the backbone class.
        config: dict of its constructor arguments.
        request: the `PlanRequest` (mesh, axes, strict, policy, ...).
        preset: the preset name, kept in the plan.
        user_entries: `UserEntry`s that override the rules.

    Returns:
        A `LayoutPlan`, with the layouts of the layer outputs it pins and
        of the key/value caches of cached decoding. A config whose dtype
        is a quantized `DTypePolicyMap` (a quantized preset's) plans its
        float model, then the variables of its quantized layers (see
        `keras_nlp.distribution.quantized`).
    """
    owner = backbone_cls.__name__
    # A quantized config plans as its float model, then quantized.
    float_config, policy_map = quantized_policies(config)
    if policy_map is not None:
        config = {**config, "dtype": keras.dtype_policies.serialize(policy_map)}
    plan = resolve_layout(
        normalize_rules(backbone_cls._layout_rules(float_config), owner),
        backbone_variables(backbone_cls, float_config),
        request,
        owner=owner,
        user_entries=user_entries,
    )
    layers = backbone_layers(backbone_cls, float_config)
    activations, sequence_parallel = _plan_activations(
        backbone_cls, float_config, layers, plan, request
    )
    context_axes = _context_axes(backbone_cls, request)
    kv_caches = plan_kv_caches(
        [layer for layer in layers if isinstance(layer, AttentionCache)],
        plan.weights,
        model_axes=(request.model_axis,),
        batch_axes=request.batch_axes,
        split_length=True,
        context_axes=context_axes,
    )
    activations += _gathered_keys(kv_caches, context_axes)
    if policy_map is not None:
        plan = plan_quantized_config(
            plan,
            [x for x in layers if isinstance(x, QuantizableLayer)],
            policy_map,
        )
    return dataclasses.replace(
        plan,
        config=dict(config),
        preset=preset,
        activations=activations,
        kv_caches=kv_caches,
        sequence_parallel=sequence_parallel,
    )


def _context_axes(backbone_cls, request):
    """The context axis, as a tuple, checked against the class."""
    if request.context_axis is None:
        return ()
    if not backbone_cls.sequence_splittable:
        raise ValueError(
            f"{backbone_cls.__name__} cannot split its sequence over the "
            f"context axis {request.context_axis!r}: {_NOT_ONE_SEQUENCE}. "
            "Use a mesh without a 'context' axis, or pass "
            "context_parallel_dim_name to a decoder or encoder backbone."
        )
    return (request.context_axis,)


def _gathered_keys(kv_caches, context_axes):
    """Each self-attention's keys and values whole over the context axis:
    every device's queries attend to every position (the all-gather
    strategy of context parallelism). Heads keep the cache's layout."""
    if not context_axes:
        return ()
    named = ", ".join(f"'{a}'" for a in context_axes)
    return tuple(
        ActivationPlan(
            f"{cache.path.rsplit('/', 1)[0]}/keys",
            (FREE, None, *cache.spec[3:]),
            f"keys and values: all-gathered over {named} (context "
            "parallel), heads as the cache's",
        )
        for cache in kv_caches
    )


def _plan_activations(backbone_cls, config, layers, plan, request):
    """The activation layouts, with or without sequence parallelism.

    Returns:
        `(activations, (enabled, reason))`.
    """
    hidden_dim = config.get("hidden_dim")
    arguments = dict(
        hidden_dim=hidden_dim,
        model_axes=(request.model_axis,),
        batch_axes=request.batch_axes,
        context_axes=_context_axes(backbone_cls, request),
    )
    activations = plan_activations(layers, plan.weights, **arguments)
    row_parallel = sum(a.reason.startswith("row-parallel") for a in activations)
    residual_bytes = 0
    if hidden_dim and backbone_cls.sequence_splittable:
        dtype = keras.dtype_policies.get(config.get("dtype")).compute_dtype
        residual_bytes = hidden_dim * dtype_itemsize(dtype)
    else:
        row_parallel = 0
    enabled, reason = choose_sequence_parallel(
        request.sequence_parallel,
        request.policy,
        model_size=request.mesh.size(request.model_axis),
        row_parallel=row_parallel,
        residual_bytes_per_token=residual_bytes,
    )
    if not backbone_cls.sequence_splittable:
        reason = (
            f"off: {backbone_cls.__name__}: {_NOT_ONE_SEQUENCE}, so the "
            "length to split is unknown when the layouts apply"
        )
        if request.sequence_parallel is True:
            raise ValueError(
                f"sequence_parallel=True cannot apply to "
                f"{backbone_cls.__name__}: {_NOT_ONE_SEQUENCE}. Pass "
                "sequence_parallel='auto' or False."
            )
    if enabled:
        activations = plan_activations(
            layers, plan.weights, sequence_parallel=True, **arguments
        )
    return activations, (enabled, reason)


def quantized_config(
    backbone_cls, config, mode, block_size=DEFAULT_INT4_BLOCK_SIZE
):
    """`config` with the dtype a quantized copy of its backbone has.

    The config `get_config` returns after `backbone.quantize(mode)` (a
    `DTypePolicyMap` of every layer Keras quantizes in that mode), made
    without building or quantizing anything: plans, `plan --dtype int4`
    and memory estimates count the stored dtypes from it, and
    `backbone_cls(**quantized_config(...))` builds the quantized
    variables directly (to load quantized weights into).

    Args:
        backbone_cls: the backbone class.
        config: dict of its (float) constructor arguments.
        mode: `"int8"`, `"int4"` or `"float8"`.
        block_size: int4's group size (`None`: one scale per channel).

    Example:

    ```python
    from keras_nlp.distribution import quantized_config
    from keras_nlp.models import LlamaBackbone

    config = dict(
        vocabulary_size=64, num_layers=1, num_query_heads=4,
        num_key_value_heads=2, hidden_dim=32, intermediate_dim=64,
    )
    int4 = quantized_config(LlamaBackbone, config, "int4")
    LlamaBackbone(**int4).get_layer("token_embedding").quantization_mode
    # 'int4'
    ```
    """
    check_planned_mode(mode)
    float_config, existing = quantized_policies(config)
    if existing is not None:
        raise ValueError(
            f"This {backbone_cls.__name__} config is quantized already (its "
            "dtype is a DTypePolicyMap); pass the float config."
        )
    float_policy = keras.dtype_policies.get(float_config.get("dtype"))
    source = float_policy.name
    if mode == "int8":
        policy = keras.dtype_policies.QuantizedDTypePolicy(mode, source)
    elif mode == "float8":
        policy = keras.dtype_policies.QuantizedFloat8DTypePolicy(mode, source)
    else:
        policy = keras.dtype_policies.Int4DTypePolicy(
            f"int4/{-1 if block_size is None else block_size}", source
        )
    layers = backbone_layers(backbone_cls, float_config)
    policy_map = keras.dtype_policies.DTypePolicyMap(
        default_policy=float_policy,
        policy_map={
            layer.path: policy
            for layer in layers
            if isinstance(layer, QuantizableLayer)
            and quantized_by_keras(layer, mode, None)
        },
    )
    return {**config, "dtype": keras.dtype_policies.serialize(policy_map)}
