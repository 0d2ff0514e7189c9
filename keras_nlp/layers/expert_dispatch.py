"""Capacity-based expert dispatch: static-shape sparse compute for any backend.

Each expert gets `capacity` slots. Every (token, choice) pair takes the
next free slot of its expert; a pair that finds its expert full is dropped
(its token keeps the other choices' outputs and the residual). First
choices claim slots before second choices, so a token loses its least
probable experts first. The experts then run one batched matmul over their
`(experts, capacity, hidden)` slots, which costs
`capacity_factor * top_k` feed-forwards per token whatever the number of
experts, with shapes fixed at trace time (no ragged matmul needed).

```python
import numpy as np
from keras_nlp.layers.expert_dispatch import combine
from keras_nlp.layers.expert_dispatch import dispatch
from keras_nlp.layers.expert_dispatch import expert_slots

tokens = np.arange(8, dtype="float32").reshape(4, 2)  # 4 tokens, hidden 2
choices = np.array([[0, 1], [0, 1], [0, 2], [1, 2]])  # top-2 of 3 experts
slots = expert_slots(choices, num_experts=3, capacity=2)
# Expert 0 is full after tokens 0 and 1: token 2's first choice is dropped.
slots_per_expert = dispatch(tokens, slots, num_slots=6)  # (6, 2)
outputs = combine(slots_per_expert, slots, np.ones((4, 2), "float32"))
# Identity experts: each token gets itself back once per kept choice.
```
"""

import math

from keras import ops


def capacity_per_expert(num_tokens, top_k, num_experts, capacity_factor):
    """Slots per expert: `ceil(capacity_factor * tokens * top_k / experts)`.

    At least one. `num_tokens` is a Python int (shapes are static under
    `jit`) or a scalar tensor.
    """
    if isinstance(num_tokens, int):
        return max(
            1, math.ceil(capacity_factor * num_tokens * top_k / num_experts)
        )
    capacity = ops.ceil(
        capacity_factor * ops.cast(num_tokens * top_k, "float32") / num_experts
    )
    return ops.maximum(ops.cast(capacity, "int32"), 1)


def expert_slots(expert_indices, num_experts, capacity):
    """The slot of each (token, choice) pair, or `num_experts * capacity`.

    Args:
        expert_indices: int `(tokens, top_k)`, each token's experts, most
            probable first.
        num_experts: int.
        capacity: slots per expert.

    Returns:
        int `(tokens, top_k)`: `expert * capacity + position` for a kept
        pair, `num_experts * capacity` (one past the last slot) for a
        dropped one.
    """
    expert_indices = ops.cast(expert_indices, "int32")
    num_tokens, top_k = ops.shape(expert_indices)
    # Choice-major order: all first choices queue before any second one.
    pairs = ops.reshape(ops.transpose(expert_indices), (-1,))
    one_hot = ops.one_hot(pairs, num_experts, dtype="int32")
    position = ops.sum((ops.cumsum(one_hot, axis=0) - 1) * one_hot, axis=-1)
    slots = ops.where(
        position < capacity,
        pairs * capacity + position,
        num_experts * capacity,
    )
    return ops.transpose(ops.reshape(slots, (top_k, num_tokens)))


def dispatch(tokens, slots, num_slots):
    """Gathers each slot's token: `(num_slots, hidden)`, empty slots zero.

    Args:
        tokens: `(tokens, hidden)`.
        slots: from `expert_slots`.
        num_slots: `num_experts * capacity`.
    """
    slots = ops.cast(slots, "int32")
    num_tokens, top_k = ops.shape(slots)
    # Which token fills each slot, counted from 1 (0: empty). Dropped pairs
    # all land in one extra slot, cut off below.
    token_numbers = ops.broadcast_to(
        ops.arange(1, num_tokens + 1, dtype="int32")[:, None],
        (num_tokens, top_k),
    )
    owner = ops.scatter(
        ops.reshape(slots, (-1, 1)),
        ops.reshape(token_numbers, (-1,)),
        (num_slots + 1,),
    )[:num_slots]
    empty_row = ops.zeros_like(tokens[:1])
    return ops.take(ops.concatenate([empty_row, tokens], axis=0), owner, 0)


def combine(slot_outputs, slots, weights):
    """Each token's weighted sum over its kept slots: `(tokens, hidden)`.

    Args:
        slot_outputs: `(num_slots, hidden)`, the experts' outputs per slot.
        slots: from `expert_slots`.
        weights: `(tokens, top_k)` routing weights.
    """
    slots = ops.cast(slots, "int32")
    dropped_row = ops.zeros_like(slot_outputs[:1])
    padded = ops.concatenate([slot_outputs, dropped_row], axis=0)
    picked = ops.take(padded, slots, axis=0)
    weights = ops.cast(weights, picked.dtype)
    return ops.sum(picked * weights[..., None], axis=1)
