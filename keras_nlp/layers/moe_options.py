"""Checks of a `SparseMoE`'s options, grouped by what they configure.

Each check raises a `ValueError` that names the option, its valid values
and what it received, so a bad config fails at construction, not inside a
traced call.
"""

from keras_nlp.layers.common import check_positive_ints
from keras_nlp.layers.common import check_rates
from keras_nlp.layers.common import check_sublayer_keys

COMPUTES = ("auto", "sparse", "dense")
ROUTINGS = ("softmax_then_top_k", "top_k_then_softmax")
FUSED_LAYOUTS = ("concatenated", "interleaved")


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_choice(name, value, valid):
    if value not in valid:
        raise ValueError(
            f"`{name}` must be one of {', '.join(map(repr, valid))}. "
            f"Received: {name}={value!r}."
        )


def check_expert_compute(compute, capacity_factor):
    """Raises a `ValueError` naming a bad `compute` or `capacity_factor`."""
    _check_choice("compute", compute, COMPUTES)
    if capacity_factor is None:
        return
    if not (_is_number(capacity_factor) and capacity_factor > 0):
        raise ValueError(
            "`capacity_factor` must be a positive number (slots per expert "
            "relative to an even split; e.g. 1.25) or None for dropless "
            f"compute. Received: capacity_factor={capacity_factor!r}."
        )
    if compute == "dense":
        raise ValueError(
            "`capacity_factor` sets the slots of sparse compute; "
            "compute='dense' runs every expert on every token and drops "
            "nothing. Pass compute='auto' or 'sparse' with a capacity "
            f"factor, or capacity_factor=None. Received: compute={compute!r}, "
            f"capacity_factor={capacity_factor!r}."
        )


def check_expert_counts(num_experts, intermediate_dim, top_k):
    """The sizes are positive integers and `top_k <= num_experts`."""
    check_positive_ints(
        num_experts=num_experts, intermediate_dim=intermediate_dim, top_k=top_k
    )
    if top_k > num_experts:
        raise ValueError(
            f"`top_k` must be at most `num_experts` ({num_experts}). "
            f"Received: top_k={top_k}."
        )


def check_routing(routing, router_jitter_noise):
    """A known `routing`, and jitter noise in `[0, 1)`."""
    _check_choice("routing", routing, ROUTINGS)
    check_rates(router_jitter_noise=router_jitter_noise)


def check_gated_unit(
    fused_gate_intermediate, fused_layout, clamp_limit, intermediate_offset
):
    """The options of the experts' gated unit agree with each other."""
    _check_choice("fused_layout", fused_layout, FUSED_LAYOUTS)
    if fused_layout != "concatenated" and not fused_gate_intermediate:
        raise ValueError(
            f"`fused_layout={fused_layout!r}` lays out a fused "
            "gate/intermediate variable: it needs "
            "`fused_gate_intermediate=True`."
        )
    if clamp_limit is not None and not (
        _is_number(clamp_limit) and clamp_limit > 0
    ):
        raise ValueError(
            "`clamp_limit` must be a positive number or None. Received: "
            f"clamp_limit={clamp_limit!r}."
        )
    if not _is_number(intermediate_offset):
        raise ValueError(
            "`intermediate_offset` must be a number. Received: "
            f"intermediate_offset={intermediate_offset!r}."
        )


def check_sublayer_names(sublayer_names, defaults):
    """Known keys, and names that are valid path segments.

    Only the router's name may contain `/`: it nests the router in layers
    of those names (GPT-OSS's `router/router_dense`). The experts' names
    are variable names, one segment each.
    """
    check_sublayer_keys(sublayer_names, defaults)
    for key, value in (sublayer_names or {}).items():
        if key == "router":
            valid = all(value.split("/"))
            expected = (
                "one or more non-empty names joined by `/` (the router "
                "nests in layers of the first names)"
            )
        else:
            valid = bool(value) and "/" not in value
            expected = "a non-empty name without `/`"
        if not valid:
            raise ValueError(
                f"`sublayer_names[{key!r}]` must be {expected}. "
                f"Received: {value!r}."
            )
