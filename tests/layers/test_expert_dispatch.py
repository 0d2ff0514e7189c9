"""Capacity-based dispatch against a direct loop over the pairs."""

import re
import textwrap

import keras
import numpy as np
import pytest

from keras_nlp.layers import expert_dispatch
from keras_nlp.layers.expert_dispatch import capacity_per_expert
from keras_nlp.layers.expert_dispatch import combine
from keras_nlp.layers.expert_dispatch import dispatch
from keras_nlp.layers.expert_dispatch import expert_slots


def looped_slots(choices, num_experts, capacity):
    """First choices first, then seconds, each in token order."""
    filled = [0] * num_experts
    slots = np.full(choices.shape, num_experts * capacity)
    for choice in range(choices.shape[1]):
        for token in range(choices.shape[0]):
            expert = choices[token, choice]
            if filled[expert] < capacity:
                slots[token, choice] = expert * capacity + filled[expert]
                filled[expert] += 1
    return slots


@pytest.mark.parametrize("capacity", [1, 2, 3, 8])
def test_slots_queue_first_choices_first(capacity):
    rng = np.random.default_rng(0)
    choices = np.stack([rng.permutation(4)[:2] for _ in range(7)]).astype(
        "int32"
    )
    slots = keras.ops.convert_to_numpy(expert_slots(choices, 4, capacity))
    np.testing.assert_array_equal(slots, looped_slots(choices, 4, capacity))


def test_dispatch_and_combine_round_trip_the_kept_pairs():
    rng = np.random.default_rng(1)
    tokens = rng.normal(size=(6, 3)).astype("float32")
    choices = np.array([[0, 1], [0, 2], [0, 1], [2, 0], [1, 2], [1, 0]])
    weights = rng.uniform(size=(6, 2)).astype("float32")
    slots = keras.ops.convert_to_numpy(expert_slots(choices, 3, 2))
    buffer = keras.ops.convert_to_numpy(dispatch(tokens, slots, 6))
    for token in range(6):
        for choice in range(2):
            if slots[token, choice] < 6:
                np.testing.assert_array_equal(
                    buffer[slots[token, choice]], tokens[token]
                )
    np.testing.assert_array_equal(slots, looped_slots(choices, 3, 2))
    assert (slots == 6).sum() == 6  # 12 pairs, 6 slots
    outputs = keras.ops.convert_to_numpy(combine(buffer, slots, weights))
    kept = (slots < 6).astype("float32")
    expected = tokens * (weights * kept).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(outputs, expected, rtol=1e-6)


def test_capacity_rounds_up_and_is_at_least_one():
    assert capacity_per_expert(10, 2, 8, 1.0) == 3
    assert capacity_per_expert(1, 1, 128, 1.0) == 1
    assert capacity_per_expert(512, 8, 128, 1.25) == 40


def test_module_example_runs():
    (block,) = re.findall(
        r"```python\n(.*?)```", expert_dispatch.__doc__, re.DOTALL
    )
    namespace = {}
    exec(textwrap.dedent(block), namespace)
    outputs = keras.ops.convert_to_numpy(namespace["outputs"])
    tokens = namespace["tokens"]
    np.testing.assert_allclose(outputs[0], 2 * tokens[0])
    np.testing.assert_allclose(outputs[2], tokens[2])  # first choice dropped
