"""Numerical parity of keras_nlp's F-Net with keras-hub's (the oracle)."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_nlp.models.f_net.f_net_backbone import FNetBackbone
from keras_nlp.models.f_net.f_net_fourier_mixing import FNetFourierMixing
from tests.models.backbone_checks import assert_dropout_in_training
from tests.models.backbone_checks import assert_encoder_matches_oracle
from tests.models.backbone_checks import output_arrays
from tests.models.backbone_checks import random_inputs
from tests.models.backbone_checks import unit_scale_oracle

# name -> (hidden_dim, intermediate_dim, num_segments, sequence length).
# The Fourier transform's two axes: powers of two, and 3 x 2^k like
# f_net_base_en's hidden 768 with an odd (prime) sequence length.
CASES = {
    "hidden32_length12": (32, 64, 4, 12),
    "hidden48_length13_segments2": (48, 96, 2, 13),
}


def make_pair(name, seed=0, **overrides):
    hidden_dim, intermediate_dim, num_segments, length = CASES[name]
    config = dict(
        vocabulary_size=96,
        num_layers=2,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        max_sequence_length=16,
        num_segments=num_segments,
        **overrides,
    )
    oracle = unit_scale_oracle("FNetBackbone", config, seed)
    inputs = random_inputs(
        96, length=length, num_segments=num_segments, padding_mask=False
    )
    return oracle, FNetBackbone(**config), inputs


@pytest.mark.parametrize("name", list(CASES))
def test_matches_keras_hub(name):
    oracle, ours, inputs = make_pair(name)
    max_diff = assert_encoder_matches_oracle(ours, oracle, inputs)
    print(f"f_net {name}: max |ours - keras_hub| = {max_diff:.3e}")


def test_training_mode_draws_dropout_masks():
    oracle, ours, inputs = make_pair("hidden32_length12")
    assert_dropout_in_training(ours, oracle, inputs)


def test_the_fourier_branch_has_no_dropout():
    """With the feed-forward zeroed, training changes nothing in a block.

    keras-hub's `FNetEncoder` drops only the feed-forward output; the
    shared block's dropout after the mixing must be off.
    """
    _, ours, _ = make_pair("hidden32_length12", dropout=0.5)
    block = ours.transformer_layers[0]
    for variable in block.output_dense.weights:
        variable.assign(np.zeros(variable.shape, "float32"))
    x = np.random.default_rng(0).normal(size=(4, 12, 32)).astype("float32")
    infer = ops.convert_to_numpy(block(x, training=False))
    train = ops.convert_to_numpy(block(x, training=True))
    np.testing.assert_array_equal(train, infer)
    # The control: the same block with mixing dropout on does change.
    block.mixing_output_dropout = True
    train = ops.convert_to_numpy(block(x, training=True))
    assert not np.allclose(train, infer, atol=1e-3)


class HiddenAxisOnly(FNetFourierMixing):
    """A 1-D transform over the hidden axis: tokens never mix."""

    def call(self, inputs, attention_mask=None, training=None):
        real, _ = ops.fft((inputs, ops.zeros_like(inputs)))
        return real


class OrthonormalScaling(FNetFourierMixing):
    """NumPy's `norm="ortho"`: the transform scaled by 1/sqrt(seq hidden)."""

    def call(self, inputs, attention_mask=None, training=None):
        shape = ops.shape(inputs)
        scale = ops.sqrt(ops.cast(shape[1] * shape[2], inputs.dtype))
        return super().call(inputs) / scale


def replace_mixing(mixing_cls):
    def mistake(model):
        for block in model.transformer_layers:
            # Past Keras's tracking, which locks a built layer.
            object.__setattr__(block, "mixing", mixing_cls())

    mistake.__name__ = mixing_cls.__name__
    return mistake


def swap_segments(model):
    table = model.segment_embedding.embeddings
    table.assign(ops.convert_to_numpy(table)[::-1])


def exact_gelu(model):
    for block in model.transformer_layers:
        block.intermediate_dense.activation = keras.activations.gelu


@pytest.mark.parametrize(
    "mistake",
    [
        replace_mixing(HiddenAxisOnly),
        replace_mixing(OrthonormalScaling),
        swap_segments,
        exact_gelu,
    ],
    ids=lambda mistake: mistake.__name__,
)
def test_the_comparison_detects_mistakes(mistake):
    """The check is sharp enough to see a wrong transform, segment or GELU."""
    oracle, ours, inputs = make_pair("hidden48_length13_segments2")
    assert_encoder_matches_oracle(ours, oracle, inputs)
    mistake(ours)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(
            output_arrays(ours(inputs))["sequence_output"],
            output_arrays(oracle(inputs))["sequence_output"],
            atol=1e-5,
        )
