"""Sharding for keras_nlp backbones: rules, resolution, plans, verification.

Backbones declare `_layout_rules(config)` with the roles below and their
layers declare what each dimension of their variables means
(`keras_nlp.distribution.dims`); everything else lives here and in
`Backbone.get_layout_map` / `Backbone.plan_layout`. Planning needs no
devices; the multi-process runtime is `keras_nlp.multihost`.
"""

from keras_nlp.distribution.backbone_planner import plan_backbone_layout
from keras_nlp.distribution.backbone_planner import quantized_config
from keras_nlp.distribution.devices import DEVICE_PROFILES
from keras_nlp.distribution.devices import DeviceProfile
from keras_nlp.distribution.devices import device_profile
from keras_nlp.distribution.dims import declare_dims
from keras_nlp.distribution.dims import declare_einsum_dims
from keras_nlp.distribution.dims import declare_flat_heads
from keras_nlp.distribution.layout_errors import LayoutError
from keras_nlp.distribution.layout_map import BackboneLayoutMap
from keras_nlp.distribution.layout_map import verify_layouts
from keras_nlp.distribution.layout_plan import Fallback
from keras_nlp.distribution.layout_plan import LayoutPlan
from keras_nlp.distribution.layout_plan import WeightPlan
from keras_nlp.distribution.memory import MemoryEstimate
from keras_nlp.distribution.memory import Workload
from keras_nlp.distribution.memory import estimate_memory
from keras_nlp.distribution.mesh import MeshShape
from keras_nlp.distribution.model_parallel import ModelParallel
from keras_nlp.distribution.recommend import Recommendation
from keras_nlp.distribution.recommend import recommend
from keras_nlp.distribution.request import PlanRequest
from keras_nlp.distribution.resolver import resolve_layout
from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import EXPERT
from keras_nlp.distribution.rules import FSDP
from keras_nlp.distribution.rules import MODEL
from keras_nlp.distribution.rules import LayoutRule
from keras_nlp.distribution.rules import Role
from keras_nlp.distribution.rules import normalize_rules
from keras_nlp.distribution.shapes import VariableInfo
from keras_nlp.distribution.shapes import abstract_variables
from keras_nlp.distribution.user_entries import UserEntry

__all__ = [
    "DATA",
    "EXPERT",
    "FSDP",
    "MODEL",
    "BackboneLayoutMap",
    "DEVICE_PROFILES",
    "DeviceProfile",
    "Fallback",
    "LayoutError",
    "LayoutPlan",
    "LayoutRule",
    "MemoryEstimate",
    "MeshShape",
    "ModelParallel",
    "PlanRequest",
    "Recommendation",
    "Role",
    "VariableInfo",
    "WeightPlan",
    "UserEntry",
    "Workload",
    "abstract_variables",
    "declare_dims",
    "declare_einsum_dims",
    "declare_flat_heads",
    "device_profile",
    "estimate_memory",
    "quantized_config",
    "normalize_rules",
    "plan_backbone_layout",
    "recommend",
    "resolve_layout",
    "verify_layouts",
]
