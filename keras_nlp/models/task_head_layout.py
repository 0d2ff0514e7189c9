"""A task's head laid out beside its backbone's plan.

A classifier's or masked LM's head has layout rules of its own (as a
backbone's `_layout_rules`); they are resolved on the active layout map's
mesh and axes into a plan of the head's weights, which the map then holds
beside the backbone's (`BackboneLayoutMap.add_head`). The task's
`layout_plan` is the two together.
"""

import dataclasses

from keras_nlp.distribution.resolver import resolve_layout
from keras_nlp.distribution.rules import normalize_rules


def plan_head(owner, rules, variables, layout_map):
    """Resolves a task head's layout rules on `layout_map`'s mesh and axes.

    Args:
        owner: the task class name, for messages.
        rules: the head's layout rules (as `Backbone._layout_rules`).
        variables: the head's `VariableInfo`s (the backbone's are planned
            by the backbone).
        layout_map: the active `BackboneLayoutMap`.

    Returns:
        The head's `LayoutPlan`.
    """
    return resolve_layout(
        normalize_rules(rules, owner),
        variables,
        layout_map.request,
        owner=owner,
    )


def combined_plan(task, head_plan):
    """The `LayoutPlan` of `task`'s backbone and head, or `None`."""
    backbone_plan = task.backbone.layout_plan
    if head_plan is None or backbone_plan is None:
        return None
    return dataclasses.replace(
        backbone_plan,
        backbone=type(task).__name__,
        weights=backbone_plan.weights + head_plan.weights,
    )
