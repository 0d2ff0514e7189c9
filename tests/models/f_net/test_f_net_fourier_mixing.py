"""`FNetFourierMixing`: the DFT's definition, its block, under a mesh."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_nlp.layers import TransformerEncoderBlock
from keras_nlp.models.f_net.f_net_fourier_mixing import FNetFourierMixing
from tests.models.backbone_checks import assert_gradients_close
from tests.models.backbone_checks import gradients
from tests.models.backbone_checks import make_mesh
from tests.models.tiny_configs import tiny
from tests.models.zoo import reference
from tests.models.zoo import sharded


def real_dft2(x):
    """`Re DFT2` over the last two axes by its definition, in float64."""
    seq, hidden = x.shape[-2:]
    # cos(a + b) = cos a cos b - sin a sin b, with a from the sequence
    # frequency and b from the hidden one.
    n, k = np.arange(seq), np.arange(hidden)
    seq_angle = 2 * np.pi * np.outer(n, n) / seq
    hidden_angle = 2 * np.pi * np.outer(k, k) / hidden
    x = x.astype("float64")
    cos_part = np.cos(seq_angle) @ x @ np.cos(hidden_angle)
    sin_part = np.sin(seq_angle) @ x @ np.sin(hidden_angle)
    return cos_part - sin_part


@pytest.mark.parametrize("shape", [(2, 12, 32), (3, 13, 48)], ids=str)
def test_equals_the_real_part_of_the_2d_dft(shape):
    x = np.random.default_rng(0).normal(size=shape).astype("float32")
    actual = ops.convert_to_numpy(FNetFourierMixing()(x))
    expected = real_dft2(x)
    # Outputs are sums of seq x hidden unit terms (|y| ~ sqrt(seq hidden)):
    # float32 rounding relative to that scale.
    scale = np.sqrt(shape[1] * shape[2])
    max_error = np.max(np.abs(actual - expected))
    print(f"{shape}: max |fft2 - dft| = {max_error:.2e}, |y| ~ {scale:.0f}")
    assert max_error <= 1e-6 * scale


def test_half_precision_inputs_keep_their_dtype():
    x = np.random.default_rng(0).normal(size=(2, 8, 16)).astype("float32")
    mixing = FNetFourierMixing(dtype="bfloat16")
    y = mixing(ops.cast(x, "bfloat16"))
    assert keras.backend.standardize_dtype(y.dtype) == "bfloat16"
    expected = real_dft2(ops.convert_to_numpy(ops.cast(x, "bfloat16")))
    np.testing.assert_allclose(
        ops.convert_to_numpy(ops.cast(y, "float32")), expected, atol=0.2
    )


def test_a_mask_is_refused():
    x = np.zeros((1, 4, 8), "float32")
    with pytest.raises(ValueError, match="takes no mask"):
        FNetFourierMixing()(x, attention_mask=np.ones((1, 4, 4), bool))


def test_block_config_round_trips():
    block = TransformerEncoderBlock(
        mixing=FNetFourierMixing(name="fourier_mixing"),
        hidden_dim=16,
        intermediate_dim=32,
        mixing_output_dropout=False,
        dropout=0.1,
    )
    x = np.random.default_rng(0).normal(size=(2, 6, 16)).astype("float32")
    expected = ops.convert_to_numpy(block(x))
    clone = TransformerEncoderBlock.from_config(block.get_config())
    assert isinstance(clone.mixing, FNetFourierMixing)
    assert clone.mixing.name == "fourier_mixing"
    assert clone.mixing_output_dropout is False
    clone.build(x.shape)
    clone.set_weights(block.get_weights())
    np.testing.assert_array_equal(ops.convert_to_numpy(clone(x)), expected)


def test_the_backbone_drops_no_fourier_output():
    """keras-hub's `FNetEncoder` drops only the feed-forward output: with it
    zeroed, training changes nothing in a block (it would with mixing
    dropout on)."""
    backbone_cls, config = tiny("FNetBackbone")
    config.update(num_layers=1, dropout=0.5)
    block = backbone_cls(**config).transformer_layers[0]
    for variable in block.output_dense.weights:
        variable.assign(np.zeros(variable.shape, "float32"))
    x = np.random.default_rng(0).normal(size=(2, 6, config["hidden_dim"]))
    x = x.astype("float32")
    infer = ops.convert_to_numpy(block(x, training=False))
    train = ops.convert_to_numpy(block(x, training=True))
    np.testing.assert_array_equal(train, infer)
    block.mixing_output_dropout = True
    train = ops.convert_to_numpy(block(x, training=True))
    assert not np.allclose(train, infer, atol=1e-3)


# (2, 4): test_conformance.py's sharded gradients. The name puts this test
# with the zoo's F-Net models (tests/conftest.py).
@pytest.mark.multi_device
@pytest.mark.parametrize("name", ["FNetBackbone"])
def test_gradients_with_hidden_on_8_devices_equal_the_unsharded_ones(name):
    """XLA aborts compiling an FFT over an axis sharded too finely (the
    tiny hidden 32 on 8 devices), forward or backward: the layer keeps
    each example whole, so both passes compile and match."""
    ref = reference(name, "tiny")
    backbone, distribution = sharded(name, "tiny", (1, 8))
    with distribution.scope():
        actual = gradients(backbone, ref.inputs)
    assert_gradients_close(actual, gradients(ref.backbone, ref.inputs))


@pytest.mark.multi_device
@pytest.mark.parametrize(
    "mesh_shape, batch",
    [((1, 8), 8), ((2, 4), 1)],
    ids=["hidden_32_on_8", "batch_1_on_2"],
)
def test_inputs_sharded_on_hidden_are_transformed_whole(mesh_shape, batch):
    """32 columns on 8 devices are too few for XLA's partitioned FFT, which
    aborts the compilation; a batch the data axis does not divide is kept
    whole too. Eager and compiled, with hidden-sharded inputs and
    outputs."""
    import jax

    mesh = make_mesh(mesh_shape)
    x = np.random.default_rng(0).normal(size=(batch, 6, 32)).astype("float32")
    layout = keras.distribution.TensorLayout((None, None, "model"), mesh)
    x_sharded = keras.distribution.distribute_tensor(x, layout)
    mixing = FNetFourierMixing()
    distribution = keras.distribution.ModelParallel(
        layout_map=keras.distribution.LayoutMap(mesh), batch_dim_name="batch"
    )
    with distribution.scope():
        eager = mixing(x_sharded)
        compiled = jax.jit(mixing, out_shardings=layout.backend_layout)(
            x_sharded
        )
    for y in (eager, compiled):
        np.testing.assert_allclose(np.asarray(y), real_dft2(x), atol=1e-4)
