"""Layout rules: what each backbone declares about its weights.

A backbone's `_layout_rules(config)` returns a short list of
`(regex, spec)` pairs. The regex is matched with `re.fullmatch` against a
variable's path. The spec says, for each dimension of that variable, which
*role* shards it: `MODEL` (the model-parallel mesh axis), `DATA` (the
data-parallel mesh axis, used FSDP-style for weights), `EXPERT` (the
expert-parallel mesh axis, for the expert dimension of mixture-of-experts
weights; the model axis when the mesh has no expert axis), a tuple of
roles, or `None` (not sharded). A spec may also be a list of specs:
alternatives in order of preference, used when the preferred one does not
divide the real shape (for example a vocabulary size that the model axis
does not divide).

The rules never name mesh axes; `get_layout_map` maps roles to the mesh's
axis names, so one rule set serves every mesh.
"""

import enum
import re


class Role(enum.Enum):
    """What a mesh axis is used for; rules name roles, never axis names."""

    MODEL = "model"
    DATA = "data"
    EXPERT = "expert"

    def __repr__(self):
        return self.name


MODEL = Role.MODEL
DATA = Role.DATA
# What `DATA` does to weights is FSDP: on a mesh with an fsdp axis
# (`get_layout_map(..., fsdp_dim_name=...)`) its dimensions shard over that
# axis, and the data axis only splits the batch. Rules may use either name.
FSDP = Role.DATA
EXPERT = Role.EXPERT


class LayoutRule:
    """One validated `(regex, spec alternatives)` pair of a backbone.

    Args:
        pattern: str. A regex matched with `re.fullmatch` against
            `variable.path`.
        alternatives: tuple of specs, most preferred first. Each spec is a
            tuple with one entry per tensor dimension; an entry is `None`, a
            `Role`, or a tuple of `Role`s.
        owner: str. Who declared the rule, for error messages.
        dim_names: optional tuple of one name per dimension (e.g.
            `("hidden", "kv_heads", "head_dim")`), used in plan reasons.
    """

    def __init__(self, pattern, alternatives, owner, dim_names=None):
        self.pattern = pattern
        self.regex = re.compile(pattern)
        self.alternatives = alternatives
        self.owner = owner
        self.dim_names = dim_names

    @property
    def rank(self):
        return len(self.alternatives[0])

    @property
    def declares_replicated(self):
        return all(entry is None for entry in self.alternatives[0])

    def matches(self, path):
        return self.regex.fullmatch(path) is not None

    def __repr__(self):
        specs = " | ".join(format_spec(spec) for spec in self.alternatives)
        return f"LayoutRule({self.pattern!r}: {specs})"


def format_spec(spec):
    """Formats a role spec or a mesh-axis spec, e.g. `(model, batch, None)`."""

    def entry_text(entry):
        if entry is None:
            return "None"
        if isinstance(entry, Role):
            return entry.name
        if isinstance(entry, tuple):
            return "(" + ", ".join(entry_text(e) for e in entry) + ")"
        return str(entry)

    trailing = "," if len(spec) == 1 else ""
    return "(" + ", ".join(entry_text(entry) for entry in spec) + trailing + ")"


def _normalize_entry(entry, pattern, owner):
    if entry is None or isinstance(entry, Role):
        return entry
    if (
        isinstance(entry, tuple)
        and entry
        and all(isinstance(role, Role) for role in entry)
    ):
        if len(set(entry)) != len(entry):
            raise ValueError(
                f"{owner} layout rule {pattern!r} repeats a role within one "
                f"dimension: {format_spec((entry,))}."
            )
        return entry[0] if len(entry) == 1 else entry
    raise ValueError(
        f"{owner} layout rule {pattern!r} has an invalid spec entry "
        f"{entry!r}. Valid entries are None, keras_nlp.distribution.MODEL, "
        "keras_nlp.distribution.DATA, keras_nlp.distribution.EXPERT, or a "
        "tuple of those roles."
    )


def _roles_in(spec):
    for entry in spec:
        if isinstance(entry, Role):
            yield entry
        elif isinstance(entry, tuple):
            yield from entry


def normalize_rules(raw_rules, owner):
    """Validates the output of `_layout_rules(config)`.

    Args:
        raw_rules: list of `(regex, spec)` or `(regex, [spec, ...])`, each
            optionally followed by a tuple naming every dimension, e.g.
            `(regex, spec, ("hidden", "kv_heads", "head_dim"))`; the names
            appear in plan reasons ("dim 1 (kv_heads, size 2) ...").
        owner: str, the backbone class name, used in error messages.

    Returns:
        A list of `LayoutRule`.
    """
    if not isinstance(raw_rules, (list, tuple)):
        raise ValueError(
            f"{owner}._layout_rules(config) must return a list of "
            f"(regex, spec) pairs. Received: {type(raw_rules).__name__}."
        )
    rules = []
    seen = set()
    for item in raw_rules:
        if not (isinstance(item, tuple) and len(item) in (2, 3)):
            raise ValueError(
                f"{owner}._layout_rules(config) must return (regex, spec) "
                "pairs or (regex, spec, dim_names) triples. Received the "
                f"item: {item!r}."
            )
        pattern, spec = item[:2]
        dim_names = item[2] if len(item) == 3 else None
        if not isinstance(pattern, str):
            raise ValueError(
                f"{owner} layout rule keys must be regex strings. "
                f"Received: {pattern!r}."
            )
        if pattern in seen:
            raise ValueError(
                f"{owner} declares the layout rule {pattern!r} twice."
            )
        seen.add(pattern)
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(
                f"{owner} layout rule {pattern!r} is not a valid regex: "
                f"{error}."
            ) from None
        alternatives = [spec] if isinstance(spec, tuple) else spec
        if not isinstance(alternatives, list) or not alternatives:
            raise ValueError(
                f"{owner} layout rule {pattern!r} must map to a spec tuple "
                f"or a non-empty list of spec tuples. Received: {spec!r}."
            )
        normalized = []
        for alternative in alternatives:
            if not isinstance(alternative, tuple):
                raise ValueError(
                    f"{owner} layout rule {pattern!r} has a spec that is not "
                    f"a tuple: {alternative!r}."
                )
            alternative = tuple(
                _normalize_entry(entry, pattern, owner) for entry in alternative
            )
            roles = list(_roles_in(alternative))
            if len(set(roles)) != len(roles):
                raise ValueError(
                    f"{owner} layout rule {pattern!r} uses a role on two "
                    f"dimensions: {format_spec(alternative)}. A mesh axis "
                    "can shard only one dimension of a tensor."
                )
            normalized.append(alternative)
        if len({len(alternative) for alternative in normalized}) != 1:
            raise ValueError(
                f"{owner} layout rule {pattern!r} has alternatives of "
                "different ranks: "
                + ", ".join(format_spec(a) for a in normalized)
                + "."
            )
        rank = len(normalized[0])
        if dim_names is not None and not (
            isinstance(dim_names, tuple)
            and len(dim_names) == rank
            and all(isinstance(name, str) for name in dim_names)
        ):
            raise ValueError(
                f"{owner} layout rule {pattern!r} has dimension names "
                f"{dim_names!r}; expected a tuple of {rank} strings, one per "
                "dimension of its spec."
            )
        rules.append(
            LayoutRule(pattern, tuple(normalized), owner, dim_names=dim_names)
        )
    return rules


def role_axes_for(
    model_axis, data_axis, expert_axis=None, fsdp_axis=None, context_axis=None
):
    """The mesh axes of each role, in the order a dimension takes them.

    `DATA` (also named `FSDP`) shards weights FSDP-style: over the fsdp
    axis when the mesh has one (the data axis then holds whole replicas),
    else over the data axis. `EXPERT` is the expert axis, or the model axis
    when there is none. Weights without an expert dimension shard
    FSDP-style over the expert axis too, so `DATA` then covers it as well,
    and so over the context axis (which splits the sequence, not weights:
    left alone, every device of it would hold whole weights).
    """
    expert_only = expert_axis if expert_axis != model_axis else None
    weights_axis = fsdp_axis if fsdp_axis is not None else data_axis
    return {
        MODEL: (model_axis,),
        DATA: tuple(
            a
            for a in (weights_axis, expert_only, context_axis)
            if a is not None
        ),
        EXPERT: (expert_axis or model_axis,),
    }


def entry_axes(entry):
    """A spec entry (None, one role or axis, or a tuple) as a tuple."""
    if entry is None:
        return ()
    return entry if isinstance(entry, tuple) else (entry,)
