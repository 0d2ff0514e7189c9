"""Sharding for keras_nlp backbones: rules, resolution, plans, verification.

Backbones declare `_layout_rules(config)` with the roles below; everything
else lives here and in `Backbone.get_layout_map` / `Backbone.plan_layout`.
"""

from keras_nlp.distribution.layout_map import BackboneLayoutMap, verify_layouts
from keras_nlp.distribution.mesh import MeshShape
from keras_nlp.distribution.plan import Fallback, LayoutPlan, WeightPlan
from keras_nlp.distribution.resolver import LayoutError, resolve_layout
from keras_nlp.distribution.rules import (
    DATA,
    MODEL,
    LayoutRule,
    Role,
    normalize_rules,
)
from keras_nlp.distribution.shapes import VariableInfo, abstract_variables

__all__ = [
    "DATA",
    "MODEL",
    "BackboneLayoutMap",
    "Fallback",
    "LayoutError",
    "LayoutPlan",
    "LayoutRule",
    "MeshShape",
    "Role",
    "VariableInfo",
    "WeightPlan",
    "abstract_variables",
    "normalize_rules",
    "resolve_layout",
    "verify_layouts",
]
