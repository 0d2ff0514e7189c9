import keras
import numpy as np
import pytest

from keras_nlp.layers import RotaryEmbedding


def reference(x, positions, max_wavelength=10000, scaling_factor=1.0):
    """RoPE written as a complex rotation of (x[k], x[k + d/2]) pairs.

    `positions` broadcasts against `(batch, seq)`.
    """
    x = x.astype("float64")
    half = x.shape[-1] // 2
    theta = max_wavelength ** (-np.arange(half) * 2.0 / x.shape[-1])
    positions = np.broadcast_to(positions, x.shape[:2]) / scaling_factor
    angles = positions[..., None] * theta  # (batch, seq, half)
    angles = angles.reshape(angles.shape[:2] + (1,) * (x.ndim - 3) + (half,))
    pairs = (x[..., :half] + 1j * x[..., half:]) * np.exp(1j * angles)
    return np.concatenate([pairs.real, pairs.imag], axis=-1)


def run(layer, x, **kwargs):
    return keras.ops.convert_to_numpy(layer(x, **kwargs))


@pytest.fixture
def x():
    return np.random.default_rng(0).normal(size=(2, 7, 3, 8)).astype("float32")


def test_matches_reference(x):
    out = run(RotaryEmbedding(), x)
    np.testing.assert_allclose(out, reference(x, np.arange(7)), atol=1e-5)


def test_position_zero_is_identity(x):
    out = run(RotaryEmbedding(), x)
    np.testing.assert_allclose(out[:, 0], x[:, 0], atol=1e-7)


def test_start_index_and_scaling_and_wavelength(x):
    layer = RotaryEmbedding(max_wavelength=500, scaling_factor=4.0)
    out = run(layer, x, start_index=5)
    expected = reference(x, np.arange(5, 12), 500, 4.0)
    np.testing.assert_allclose(out, expected, atol=1e-5)


def test_explicit_positions(x):
    layer = RotaryEmbedding()
    positions = np.array([3, 1, 4, 1, 5, 9, 2])
    out = run(layer, x, positions=positions, start_index=100)
    np.testing.assert_allclose(out, reference(x, positions), atol=1e-5)

    batched = np.array([[0, 1, 2, 3, 4, 5, 6], [10, 11, 12, 0, 0, 0, 0]])
    out = run(layer, x, positions=batched)
    np.testing.assert_allclose(out, reference(x, batched), atol=1e-5)


def test_rank_3_input():
    x = np.random.default_rng(1).normal(size=(2, 6, 10)).astype("float32")
    out = run(RotaryEmbedding(), x, start_index=2)
    np.testing.assert_allclose(out, reference(x, np.arange(2, 8)), atol=1e-5)


def test_scores_depend_only_on_relative_position():
    rng = np.random.default_rng(2)
    q = rng.normal(size=(1, 1, 1, 16)).astype("float32")
    k = rng.normal(size=(1, 1, 1, 16)).astype("float32")
    layer = RotaryEmbedding()
    scores = []
    for offset in (0, 13, 40):
        rq = run(layer, q, start_index=offset + 6)
        rk = run(layer, k, start_index=offset + 2)
        scores.append(float(np.sum(rq * rk)))
    np.testing.assert_allclose(scores, scores[0], rtol=1e-4)


def test_compute_dtype_output():
    x = np.ones((1, 4, 2, 8), "float32")
    out = RotaryEmbedding(dtype="bfloat16")(x)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"


def test_odd_feature_axis_raises():
    with pytest.raises(ValueError, match="even"):
        RotaryEmbedding()(np.ones((1, 3, 5), "float32"))


def test_get_config_round_trip(x):
    layer = RotaryEmbedding(max_wavelength=1234, scaling_factor=2.5, name="r")
    config = layer.get_config()
    assert config["max_wavelength"] == 1234
    assert config["scaling_factor"] == 2.5
    clone = RotaryEmbedding.from_config(config)
    assert clone.name == "r"
    np.testing.assert_allclose(run(clone, x), run(layer, x))
