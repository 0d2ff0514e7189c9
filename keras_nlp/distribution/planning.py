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
from keras_nlp.distribution.cost import DEFAULT_TOKENS_PER_STEP
from keras_nlp.distribution.kv_cache import AttentionCache
from keras_nlp.distribution.kv_cache import plan_kv_caches
from keras_nlp.distribution.mesh import MeshShape
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
    backbone_cls,
    config,
    mesh,
    *,
    model_axis,
    data_axis,
    expert_axis=None,
    fsdp_axis=None,
    strict=False,
    dtype=None,
    preset=None,
    user_entries=(),
    policy="auto",
    tokens_per_step=DEFAULT_TOKENS_PER_STEP,
):
    """Resolves `backbone_cls._layout_rules(config)` for its real shapes.

    Args:
        backbone_cls: the backbone class.
        config: dict of its constructor arguments.
        mesh: a `DeviceMesh`, `MeshShape` or dict of axis name -> size.
        model_axis: mesh axis name of the `MODEL` role.
        data_axis: mesh axis name of the `DATA` role, or `None`.
        expert_axis: mesh axis name of the `EXPERT` role, or `None` for the
            model axis.
        fsdp_axis: mesh axis name that shards weights FSDP-style instead of
            the data axis, or `None`.
        strict: bool, raise instead of falling back.
        dtype: optional dtype to count bytes in.
        preset: the preset name, kept in the plan.
        user_entries: `UserEntry`s that override the rules.
        policy: `"auto"`, `"memory"` or `"communication"` (see
            `resolve_layout`).
        tokens_per_step: int, the tokens of one step that the candidates'
            costs are estimated for (see `resolve_layout`).

    Returns:
        A `LayoutPlan`.
    """
    owner = backbone_cls.__name__
    plan = resolve_layout(
        normalize_rules(backbone_cls._layout_rules(config), owner),
        backbone_variables(backbone_cls, config),
        MeshShape.from_mesh(mesh),
        model_axis=model_axis,
        data_axis=data_axis,
        expert_axis=expert_axis,
        fsdp_axis=fsdp_axis,
        owner=owner,
        config=config,
        preset=preset,
        dtype=dtype,
        strict=strict,
        user_entries=user_entries,
        policy=policy,
        tokens_per_step=tokens_per_step,
    )
    activations = plan_activations(
        backbone_layers(backbone_cls, config),
        plan.weights,
        hidden_dim=config.get("hidden_dim"),
        model_axes=(model_axis,),
        batch_axes=tuple(a for a in (data_axis, fsdp_axis) if a),
    )
    kv_caches = plan_kv_caches(
        [
            layer
            for layer in backbone_layers(backbone_cls, config)
            if isinstance(layer, AttentionCache)
        ],
        plan.weights,
        model_axes=(model_axis,),
        batch_axes=tuple(a for a in (data_axis, fsdp_axis) if a),
    )
    return dataclasses.replace(
        plan, activations=activations, kv_caches=kv_caches
    )
