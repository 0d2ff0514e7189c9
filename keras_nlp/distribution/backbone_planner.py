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

from keras_nlp.distribution.activations import plan_activations
from keras_nlp.distribution.kv_cache import AttentionCache
from keras_nlp.distribution.kv_cache import plan_kv_caches
from keras_nlp.distribution.quantizable import QuantizableLayer
from keras_nlp.distribution.quantizable import quantized_policies
from keras_nlp.distribution.quantized import plan_quantized_config
from keras_nlp.distribution.resolver import resolve_layout
from keras_nlp.distribution.rules import normalize_rules
from keras_nlp.distribution.shapes import abstract_build

_CACHE = {}
_CACHE_SIZE = 64


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
    activations = plan_activations(
        layers,
        plan.weights,
        hidden_dim=float_config.get("hidden_dim"),
        model_axes=(request.model_axis,),
        batch_axes=request.batch_axes,
    )
    kv_caches = plan_kv_caches(
        [layer for layer in layers if isinstance(layer, AttentionCache)],
        plan.weights,
        model_axes=(request.model_axis,),
        batch_axes=request.batch_axes,
    )
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
    )
