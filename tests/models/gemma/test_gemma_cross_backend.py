"""GemmaBackbone gives JAX's output on every backend.

The golden file holds the JAX outputs (see golden/make_gemma_golden.py). The
JAX run checks they still hold; CI's TensorFlow run
(`KERAS_BACKEND=tensorflow pytest -m "not multi_device"`) checks that
TensorFlow gives the same numbers.
"""

import pathlib
import sys

import keras
import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from cross_backend_cases import CASES  # noqa: E402
from cross_backend_cases import assign_path_seeded_weights  # noqa: E402
from cross_backend_cases import case_inputs  # noqa: E402

from keras_nlp.models import GemmaBackbone  # noqa: E402

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden/gemma_outputs.npz"


@pytest.mark.parametrize("name", list(CASES))
def test_output_equals_jax_golden(name):
    model = GemmaBackbone(**CASES[name])
    assign_path_seeded_weights(model)
    actual = keras.ops.convert_to_numpy(model(case_inputs()))
    with np.load(GOLDEN) as golden:
        expected = golden[name]
    assert actual.shape == expected.shape == (3, 9, 32)
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=0)
