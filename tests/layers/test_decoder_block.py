"""DecoderBlock: residual wiring, feed-forward variants, cache, errors."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_nlp.layers import CachedGroupedQueryAttention
from keras_nlp.layers import DecoderBlock
from keras_nlp.layers import RotaryEmbedding
from keras_nlp.layers import decoder_attention_mask

INPUTS = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")


def numpy(x):
    return ops.convert_to_numpy(x)


def make_block(**kwargs):
    attention = CachedGroupedQueryAttention(
        4, 2, rotary_embedding=RotaryEmbedding(), name="self_attention"
    )
    return DecoderBlock(
        attention=attention, hidden_dim=16, intermediate_dim=24, **kwargs
    )


@pytest.mark.parametrize("parallel_residual", [False, True])
@pytest.mark.parametrize(
    "options",
    [
        dict(),
        dict(gated=False, activation="gelu_approximate", use_bias=True),
        dict(normalization="layer", activation="relu", gated=False),
    ],
    ids=["swiglu", "gelu_bias", "layer_norm_relu"],
)
def test_block_equals_its_formula(options, parallel_residual):
    keras.utils.set_random_seed(0)
    block = make_block(parallel_residual=parallel_residual, **options)
    outputs = numpy(block(INPUTS))
    mask = decoder_attention_mask(2, 5, 5)
    attended = numpy(
        block.attention(block.attention_norm(INPUTS), attention_mask=mask)
    )
    activation = {
        "silu": keras.activations.silu,
        "gelu_approximate": lambda x: keras.activations.gelu(
            x, approximate=True
        ),
        "relu": keras.activations.relu,
    }[options.get("activation", "silu")]

    def feedforward(x):
        hidden = block.intermediate_dense(x)
        if block.gate_dense is not None:
            hidden = hidden * activation(block.gate_dense(x))
        else:
            hidden = activation(hidden)
        return numpy(block.output_dense(hidden))

    if parallel_residual:
        expected = (
            INPUTS + attended + feedforward(block.feedforward_norm(INPUTS))
        )
    else:
        residual = INPUTS + attended
        expected = residual + feedforward(block.feedforward_norm(residual))
    np.testing.assert_allclose(outputs, expected, atol=1e-5)


def test_post_norm_block_equals_its_formula():
    # OPT-350M: each norm applied to its residual sum.
    keras.utils.set_random_seed(0)
    block = make_block(
        normalization="layer",
        activation="relu",
        gated=False,
        use_bias=True,
        normalize_first=False,
    )
    outputs = numpy(block(INPUTS))
    mask = decoder_attention_mask(2, 5, 5)
    attended = block.attention(INPUTS, attention_mask=mask)
    hidden = numpy(block.attention_norm(INPUTS + attended))
    fed = block.output_dense(
        keras.activations.relu(block.intermediate_dense(hidden))
    )
    expected = numpy(block.feedforward_norm(hidden + fed))
    np.testing.assert_allclose(outputs, expected, atol=1e-5)


def test_paths_follow_the_sublayer_names():
    block = make_block(
        use_bias=True,
        gated=False,
        normalization="layer",
        sublayer_names={
            "attention_norm": "input_layernorm",
            "intermediate": "dense_h_to_4h",
            "output": "dense_4h_to_h",
        },
        name="transformer_layer_0",
    )
    block.build((None, None, 16))
    paths = sorted(v.path.split("/", 1)[1] for v in block.weights)
    assert paths == sorted(
        [
            "input_layernorm/gamma",
            "input_layernorm/beta",
            "feedforward_layernorm/gamma",
            "feedforward_layernorm/beta",
            "dense_h_to_4h/kernel",
            "dense_h_to_4h/bias",
            "dense_4h_to_h/kernel",
            "dense_4h_to_h/bias",
            "self_attention/query/kernel",
            "self_attention/key/kernel",
            "self_attention/value/kernel",
            "self_attention/attention_output/kernel",
        ]
    )


def test_a_custom_feedforward_replaces_the_dense_one():
    class Doubler(keras.layers.Layer):
        def call(self, x):
            return 2 * x

    attention = CachedGroupedQueryAttention(4, 2, name="self_attention")
    block = DecoderBlock(
        attention=attention, hidden_dim=16, feedforward=Doubler()
    )
    outputs = numpy(block(INPUTS))
    residual = INPUTS + numpy(
        attention(
            block.attention_norm(INPUTS),
            attention_mask=decoder_attention_mask(2, 5, 5),
        )
    )
    np.testing.assert_allclose(
        outputs,
        residual + 2 * numpy(block.feedforward_norm(residual)),
        atol=1e-5,
    )
    assert block.intermediate_dense is None


def test_padding_hides_padded_keys_and_cache_decoding_matches():
    keras.utils.set_random_seed(0)
    block = make_block()
    padding = np.array([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]], "int32")
    full = numpy(block(INPUTS, padding_mask=padding))
    changed = INPUTS.copy()
    changed[0, 0] += 5.0  # a padded token: invisible to the others
    np.testing.assert_allclose(
        numpy(block(changed, padding_mask=padding))[0, 1:],
        full[0, 1:],
        atol=1e-5,
    )
    cache = np.zeros((2, 2, 5, 2, 4), "float32")
    steps = []
    for t in range(5):
        output, cache = block(
            INPUTS[:, t : t + 1],
            padding_mask=padding,
            cache=cache,
            cache_update_index=t,
        )
        steps.append(numpy(output))
    steps = np.concatenate(steps, axis=1)
    np.testing.assert_allclose(steps[0, 1:], full[0, 1:], atol=1e-5)
    np.testing.assert_allclose(steps[1], full[1], atol=1e-5)


def test_config_round_trip():
    block = make_block(activation="gelu_approximate", parallel_residual=True)
    clone = DecoderBlock.from_config(block.get_config())
    assert clone.get_config() == block.get_config()
    assert clone.attention.rotary_embedding is not None


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(normalization="batch"), "normalization='batch'"),
        (dict(intermediate_dim=None), "Either `intermediate_dim`"),
        (dict(sublayer_names={"mlp": "x"}), "Unknown `sublayer_names` keys"),
        (
            dict(parallel_residual=True, normalize_first=False),
            "parallel_residual=True, normalize_first=False",
        ),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    attention = CachedGroupedQueryAttention(4, 2)
    arguments = dict(attention=attention, hidden_dim=16, intermediate_dim=24)
    arguments.update(kwargs)
    with pytest.raises(ValueError) as info:
        DecoderBlock(**arguments)
    assert message in str(info.value)
