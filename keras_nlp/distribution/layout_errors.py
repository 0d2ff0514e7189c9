"""The errors planning raises, each naming what is wrong and the fix.

Problems are collected by kind while the rules are matched (see
`rule_matching`), so one error lists every problem at once; `strict`
requests add the weights that cannot be laid out as their rules ask.
"""

from keras_nlp.distribution.rules import format_spec

# More lines than this are cut from a list in a message.
MAX_LISTED = 12

# Each kind of problem, in the order the error lists them: what is wrong
# (before its list of lines) and how to fix it (after, if anything).
PROBLEM_TEXTS = (
    (
        "user",
        "Entries set on the layout map override the plan for the "
        "variables they match, but:",
        "Fix or delete these entries (del layout_map[key]); the plan lists "
        "every variable path.",
    ),
    (
        "orientation",
        "A rule's dimension names must be its variable's, in the order its "
        "layer creates them; the spec is probably transposed:",
        "Write the spec in the layer's order (or build it with "
        "keras_nlp.layers.layout_rules, which reads the layers' dimension "
        "names).",
    ),
    (
        "adapter",
        "LoRA adapter weights take the layout of their kernel and must "
        "match no layout rule (end kernel regexes with '/kernel'), but:",
        None,
    ),
    (
        "overlap",
        "Each variable must match at most one layout rule, but:",
        None,
    ),
    ("rank", "Layout rules must give one entry per dimension, but:", None),
    (
        "uncovered",
        "These variables of rank >= 2 match no layout rule and would be "
        "silently replicated on every device. Add a rule for them to "
        "{owner}._layout_rules, or declare them replicated with an "
        "all-None spec:",
        None,
    ),
    (
        "unused",
        "These {owner} layout rules match no variable of this config (a "
        "typo, or a rule that only applies to other configs and should be "
        "returned conditionally):",
        None,
    ),
)
PROBLEM_KINDS = tuple(kind for kind, _, _ in PROBLEM_TEXTS)


class LayoutError(ValueError):
    """A layout plan cannot be made, or the built model does not follow it."""


def bullet_list(lines):
    """Indented `- ` lines, cut after a dozen, for error messages."""
    shown = lines[:MAX_LISTED]
    text = "\n".join(f"  - {line}" for line in shown)
    if len(lines) > MAX_LISTED:
        text += f"\n  ... and {len(lines) - MAX_LISTED} more"
    return text


def raise_rule_problems(owner, problems):
    """Raises one `LayoutError` listing every problem, if there is any.

    Args:
        owner: the backbone class name.
        problems: dict of kind (see `PROBLEM_KINDS`) -> lines.
    """
    messages = []
    for kind, what, fix in PROBLEM_TEXTS:
        if not problems.get(kind):
            continue
        message = what.format(owner=owner) + "\n" + bullet_list(problems[kind])
        messages.append(message + (f"\n{fix}" if fix else ""))
    if messages:
        raise LayoutError(
            f"The layout rules of {owner} do not fit its variables.\n"
            + "\n".join(messages)
        )


def check_strict(plan, request):
    """Raises unless a `strict` request's plan follows its rules.

    Nothing may fall back to replication, and an expert axis of its own
    must divide every expert dimension it is given.
    """
    if not request.strict:
        return
    owner, mesh = plan.backbone, request.mesh
    if plan.fallbacks:
        lines = [
            f"{weight.path} {weight.shape} -> {format_spec(weight.spec)}: "
            + "; ".join(f.describe() for f in weight.fallbacks)
            for weight in plan.fallbacks
        ]
        raise LayoutError(
            f"strict=True: {len(plan.fallbacks)} {owner} weight(s) cannot be "
            f"sharded as their rules ask on mesh {mesh}:\n"
            + bullet_list(lines)
            + "\nChoose mesh axis sizes that divide these dimensions, or "
            "pass strict=False to accept replication along those axes."
        )
    expert_axis = request.expert_axis
    if expert_axis in (None, request.model_axis):
        return
    off_axis = [
        f"{weight.path} {weight.shape}: {f.short()}"
        for weight in plan.weights
        for f in weight.moved
        if f.axis == expert_axis
    ]
    if off_axis:
        raise LayoutError(
            f"strict=True: the expert axis '{expert_axis}' (size "
            f"{mesh.size(expert_axis)}) does not divide the experts of "
            f"{len(off_axis)} {owner} weight(s), so they would not be "
            "split by expert:\n"
            + bullet_list(off_axis)
            + "\nChoose an expert axis size that divides the number of "
            "experts, or pass strict=False to shard those weights "
            "along other dimensions instead."
        )
