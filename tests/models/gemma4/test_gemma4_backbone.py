"""Gemma 4's keras-hub input `position_ids`: read by RoPE, never dropped.

Other positions than the token indices are compared with keras-hub in the
oracle row `gemma4-strided_positions` (tests/models/oracle_cases.py).
"""

import numpy as np
import pytest

from tests.models.zoo import reference


# Parametrized with the class so that it runs in that class's group, on the
# worker that has already built the zoo's Gemma 4 (tests/conftest.py).
@pytest.mark.parametrize("name", ["Gemma4Backbone"])
def test_token_indices_as_position_ids_change_nothing(name):
    # What keras-hub's preprocessors pass. Traced and other positions:
    # the oracle row (compiled, with a mistake that ignores them).
    ref = reference(name)
    batch, length = ref.inputs["token_ids"].shape
    indices = np.broadcast_to(np.arange(length, dtype="int32"), (batch, length))
    with_positions = ref.backbone(dict(ref.inputs, position_ids=indices))
    np.testing.assert_array_equal(
        np.asarray(with_positions), np.asarray(ref.backbone(ref.inputs))
    )
