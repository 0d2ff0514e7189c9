import keras
import numpy as np
import pytest

from keras_nlp.layers import ZeroCenteredRMSNormalization


def reference(x, scale, epsilon):
    x = x.astype("float64")
    rms = np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + epsilon)
    return x / rms * (1.0 + scale)


@pytest.mark.parametrize("epsilon", [1e-6, 1e-2])
def test_matches_numpy_reference(epsilon):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 16)).astype("float32") * 3.0
    scale = rng.normal(size=(16,)).astype("float32")
    layer = ZeroCenteredRMSNormalization(epsilon=epsilon)
    layer.build(x.shape)
    layer.scale.assign(scale)
    out = keras.ops.convert_to_numpy(layer(x))
    np.testing.assert_allclose(
        out, reference(x, scale, epsilon), rtol=1e-5, atol=1e-5
    )


def test_fresh_layer_is_plain_rms_norm():
    x = np.array([[3.0, 4.0], [1.0, -1.0]], dtype="float32")
    layer = ZeroCenteredRMSNormalization(epsilon=0.0)
    out = keras.ops.convert_to_numpy(layer(x))
    # RMS of (3, 4) is sqrt(12.5); of (1, -1) is 1.
    expected = np.array(
        [[3 / np.sqrt(12.5), 4 / np.sqrt(12.5)], [1.0, -1.0]], "float32"
    )
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert layer.scale.path.endswith("scale")
    assert tuple(layer.scale.shape) == (2,)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(layer.scale.value), 0
    )


def test_computes_in_float32_and_returns_compute_dtype():
    # Large inputs whose squares overflow float16 must still normalize.
    x = np.full((1, 4), 1000.0, dtype="float32")
    layer = ZeroCenteredRMSNormalization(dtype="mixed_float16")
    out = layer(x)
    assert keras.backend.standardize_dtype(out.dtype) == "float16"
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(out).astype("float32"), 1.0, rtol=1e-3
    )

    layer = ZeroCenteredRMSNormalization(dtype="bfloat16")
    out = layer(x)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"


def test_get_config_round_trip():
    layer = ZeroCenteredRMSNormalization(epsilon=1e-3, name="norm")
    config = layer.get_config()
    assert config["epsilon"] == 1e-3
    clone = ZeroCenteredRMSNormalization.from_config(config)
    assert clone.epsilon == 1e-3
    assert clone.name == "norm"

    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 8)).astype("float32")
    layer.build(x.shape)
    layer.scale.assign(rng.normal(size=(8,)).astype("float32"))
    clone.build(x.shape)
    clone.scale.assign(keras.ops.convert_to_numpy(layer.scale.value))
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(clone(x)),
        keras.ops.convert_to_numpy(layer(x)),
    )
