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

from tests.models.backbone_checks import output_arrays
from tests.models.tiny_configs import TINY_CONFIGS
from tests.models.tiny_configs import tiny

# Relative to the largest float output. Random tiny weights land between
# 0.02 and 0.07; reading the int8 position table unscaled gave 0.8-1.6.
TOLERANCE = 0.2
DENSE_TYPES = (keras.layers.Dense, keras.layers.EinsumDense)


@pytest.mark.filterwarnings("ignore:Layer .* does not have a `quantize`")
def test_int8_quantized_backbone_stays_close_to_float():
    keras.utils.set_random_seed(0)
    name = "PaliGemmaBackbone"
    cls, config = tiny(name)
    reference = cls(**config)
    backbone = cls(**config)
    backbone.set_weights(reference.get_weights())
    inputs = TINY_CONFIGS[name].inputs_for(backbone, config, batch=2)
    expected = output_arrays(reference.predict(inputs, verbose=0))

    # Before any call: an eager call would build layers Keras left unbuilt.
    backbone.quantize("int8")

    float_dense = [
        layer.path
        for layer in backbone._flatten_layers()
        if type(layer) in DENSE_TYPES and layer.quantization_mode != "int8"
    ]
    assert not float_dense
    actual = output_arrays(backbone.predict(inputs, verbose=0))
    for key, value in expected.items():
        error = np.abs(actual[key] - value).max() / np.abs(value).max()
        assert error < TOLERANCE, f"{key}: relative error {error:.3f}"
