"""`backbone.quantize("int8")` quantizes every dense layer and keeps the
outputs near the float ones.

PaliGemma holds every layer that once broke it (found by
`benchmarks/keras_hub_harness.py`): `named_dense` layers (Keras 3.15 could
not quantize their ellipsis `EinsumDense`), rotary embeddings that Keras
never marked built, and a vision position table read around its layer,
which skipped the int8 scale. One model takes ~10 s to compile (eager
calls took longer, and far longer next to another test worker), so one
class stands for the rest; the harness script runs all of them.
"""

import keras
import numpy as np
import pytest

from tests.models.backbone_checks import jit_forward
from tests.models.zoo import build_with_weights
from tests.models.zoo import reference

# Relative to the largest float output. Random tiny weights land between
# 0.02 and 0.07; reading the int8 position table unscaled gave 0.8-1.6.
TOLERANCE = 0.2
DENSE_TYPES = (keras.layers.Dense, keras.layers.EinsumDense)


@pytest.mark.filterwarnings("ignore:Layer .* does not have a `quantize`")
# Parametrized by class so that it runs on the worker that holds the zoo's
# PaliGemma (tests/conftest.py groups by class).
@pytest.mark.parametrize("name", ["PaliGemmaBackbone"])
def test_int8_quantized_backbone_stays_close_to_float(name):
    # The zoo's float model, inputs and outputs.
    ref = reference(name)
    backbone = build_with_weights(
        ref.backbone_cls, ref.config, ref.backbone.weights
    )
    inputs, expected = ref.inputs, ref.outputs

    # Before any call: an eager call would build layers Keras left unbuilt.
    backbone.quantize("int8")

    float_dense = [
        layer.path
        for layer in backbone._flatten_layers()
        if type(layer) in DENSE_TYPES and layer.quantization_mode != "int8"
    ]
    assert not float_dense
    actual = jit_forward(backbone, inputs)
    for key, value in expected.items():
        error = np.abs(actual[key] - value).max() / np.abs(value).max()
        assert error < TOLERANCE, f"{key}: relative error {error:.3f}"
