"""Sharding for keras_nlp backbones: rules, resolution, plans, verification.

Backbones declare `_layout_rules(config)` with the roles below; everything
else lives here and in `Backbone.get_layout_map` / `Backbone.plan_layout`.
"""

from keras_nlp.distribution import multihost
from keras_nlp.distribution.layout_map import BackboneLayoutMap
from keras_nlp.distribution.layout_map import verify_layouts
from keras_nlp.distribution.mesh import MeshShape
from keras_nlp.distribution.multihost import ClusterError
from keras_nlp.distribution.multihost import gather
from keras_nlp.distribution.multihost import global_device_mesh
from keras_nlp.distribution.multihost import make_global_batch
from keras_nlp.distribution.multihost import process_batch_slice
from keras_nlp.distribution.plan import Fallback
from keras_nlp.distribution.plan import LayoutPlan
from keras_nlp.distribution.plan import WeightPlan
from keras_nlp.distribution.resolver import LayoutError
from keras_nlp.distribution.resolver import resolve_layout
from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import MODEL
from keras_nlp.distribution.rules import LayoutRule
from keras_nlp.distribution.rules import Role
from keras_nlp.distribution.rules import normalize_rules
from keras_nlp.distribution.shapes import VariableInfo
from keras_nlp.distribution.shapes import abstract_variables

__all__ = [
    "DATA",
    "MODEL",
    "BackboneLayoutMap",
    "ClusterError",
    "Fallback",
    "LayoutError",
    "LayoutPlan",
    "LayoutRule",
    "MeshShape",
    "Role",
    "VariableInfo",
    "WeightPlan",
    "abstract_variables",
    "gather",
    "global_device_mesh",
    "make_global_batch",
    "multihost",
    "normalize_rules",
    "process_batch_slice",
    "resolve_layout",
    "verify_layouts",
]
