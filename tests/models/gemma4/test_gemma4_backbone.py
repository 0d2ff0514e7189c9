"""Gemma 4's keras-hub input `position_ids`: checked, never ignored."""

import jax
import numpy as np
import pytest

from tests.models.zoo import reference


# Parametrized with the class so that it runs in that class's group, on the
# worker that has already built the zoo's Gemma 4 (tests/conftest.py).
@pytest.mark.parametrize("name", ["Gemma4Backbone"])
def test_position_ids_must_be_the_token_indices(name):
    ref = reference(name)
    batch, length = ref.inputs["token_ids"].shape
    indices = np.broadcast_to(np.arange(length), (batch, length))
    # The indices are what RoPE reads anyway: the same outputs.
    with_positions = ref.backbone(dict(ref.inputs, position_ids=indices))
    np.testing.assert_array_equal(
        np.asarray(with_positions), np.asarray(ref.backbone(ref.inputs))
    )
    shifted = indices + 1
    with pytest.raises(
        ValueError, match=r"arange\(sequence_length\).*\[\[1, 2"
    ):
        ref.backbone(dict(ref.inputs, position_ids=shifted))
    # Traced positions cannot be checked: refused, naming the fix.
    with pytest.raises(ValueError, match="Leave `position_ids` out"):
        jax.jit(ref.backbone)(dict(ref.inputs, position_ids=indices))
