"""Numerical parity of keras_nlp's Gemma with keras-hub's (the oracle)."""

import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

from keras_nlp.models.gemma import GemmaBackbone
from keras_nlp.models.gemma.gemma_decoder_block import gemma_attention

TINY = dict(vocabulary_size=64, num_layers=2, hidden_dim=32, head_dim=8)
GEMMA_2_OPTIONS = dict(
    use_post_ffw_norm=True,
    use_post_attention_norm=True,
    # Small caps so that tanh is far from linear on these tiny models.
    attention_logit_soft_cap=1.0,
    final_logit_soft_cap=0.5,
    use_sliding_window_attention=True,
    sliding_window_size=3,
    query_head_dim_normalize=False,
)
HEADS = {"mqa_8_1": (8, 1), "mha_4_4": (4, 4), "gqa_8_4": (8, 4)}
SEQ_LEN = 9


def make_config(heads, gemma_2):
    num_query_heads, num_key_value_heads = HEADS[heads]
    return dict(
        TINY,
        num_query_heads=num_query_heads,
        num_key_value_heads=num_key_value_heads,
        intermediate_dim=96,
        **(GEMMA_2_OPTIONS if gemma_2 else {}),
    )


def make_inputs(seed=0, batch=3, vocabulary_size=64):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(1, vocabulary_size, (batch, SEQ_LEN))
    padding_mask = np.ones((batch, SEQ_LEN), "int32")
    padding_mask[1, :4] = 0  # left padding
    token_ids[1, :4] = 0
    return {
        "token_ids": token_ids.astype("int32"),
        "padding_mask": padding_mask,
    }


def weights_by_path(model):
    return {v.path: v for v in model.weights}


def make_pair(config, seed=0):
    """Builds the oracle and our model with identical weights."""
    keras.utils.set_random_seed(seed)
    oracle = keras_hub.models.GemmaBackbone(**config)
    # keras-hub's decoder block always builds its attention with
    # `query_head_dim_normalize=True`, ignoring the backbone argument; the
    # flag is read at call time, so set it to what the config asks for.
    for block in oracle.transformer_layers:
        block.attention.query_head_dim_normalize = config.get(
            "query_head_dim_normalize", True
        )
    ours = GemmaBackbone(**config)

    oracle_weights = weights_by_path(oracle)
    our_weights = weights_by_path(ours)
    assert sorted(oracle_weights) == sorted(our_weights)
    rng = np.random.default_rng(seed)
    for path, oracle_variable in oracle_weights.items():
        assert tuple(our_weights[path].shape) == tuple(oracle_variable.shape)
        if path.endswith("/scale"):
            value = rng.normal(0.0, 0.5, oracle_variable.shape)
            value = value.astype("float32")
            oracle_variable.assign(value)
        else:
            value = ops.convert_to_numpy(oracle_variable.value)
        our_weights[path].assign(value)
    return oracle, ours


@pytest.mark.parametrize("gemma_2", [False, True], ids=["gemma1", "gemma2"])
@pytest.mark.parametrize("heads", list(HEADS))
def test_matches_keras_hub(heads, gemma_2):
    config = make_config(heads, gemma_2)
    oracle, ours = make_pair(config)
    inputs = make_inputs()

    expected = ops.convert_to_numpy(oracle(inputs))
    actual = ops.convert_to_numpy(ours(inputs))
    assert actual.shape == (3, SEQ_LEN, 32)
    assert np.all(np.isfinite(actual))
    max_diff = float(np.max(np.abs(actual - expected)))
    print(f"{heads} gemma2={gemma_2}: max |ours - keras_hub| = {max_diff:.3e}")
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=0)

    # The tied embedding projects back to (soft-capped) vocabulary logits.
    expected_logits = ops.convert_to_numpy(
        oracle.token_embedding(expected, reverse=True)
    )
    logits = ops.convert_to_numpy(ours.token_embedding(actual, reverse=True))
    np.testing.assert_allclose(logits, expected_logits, atol=1e-5, rtol=0)
    if gemma_2:
        embeddings = ops.convert_to_numpy(ours.token_embedding.embeddings.value)
        uncapped = actual @ embeddings.T
        cap = config["final_logit_soft_cap"]
        assert np.abs(uncapped).max() > 2 * cap  # the cap is exercised
        np.testing.assert_allclose(
            logits, cap * np.tanh(uncapped / cap), atol=1e-5
        )


def test_padded_rows_do_not_change_real_tokens():
    """Left padding must not affect the representations of real tokens."""
    config = make_config("gqa_8_4", gemma_2=True)
    _, ours = make_pair(config)
    inputs = make_inputs()
    padded = ops.convert_to_numpy(ours(inputs))
    unpadded = ops.convert_to_numpy(
        ours(
            {
                "token_ids": inputs["token_ids"][1:2, 4:],
                "padding_mask": inputs["padding_mask"][1:2, 4:],
            }
        )
    )
    # RoPE uses absolute positions, so real tokens sit at shifted positions;
    # attention only depends on relative positions, hence outputs agree.
    np.testing.assert_allclose(padded[1:2, 4:], unpadded, atol=1e-5)


def numpy_rope(x):
    half = x.shape[-1] // 2
    theta = 10000.0 ** (-np.arange(half) * 2.0 / x.shape[-1])
    angles = np.arange(x.shape[1])[:, None] * theta  # (seq, half)
    cos, sin = np.cos(angles)[None, :, None], np.sin(angles)[None, :, None]
    first, second = x[..., :half], x[..., half:]
    return np.concatenate(
        [first * cos - second * sin, second * cos + first * sin], axis=-1
    )


def numpy_attention(layer, x, mask, options):
    """Reference Gemma attention in float64 numpy, one head at a time."""
    kernel = {
        name: ops.convert_to_numpy(dense.kernel.value).astype("float64")
        for name, dense in [
            ("q", layer.query_dense),
            ("k", layer.key_dense),
            ("v", layer.value_dense),
            ("o", layer.output_dense),
        ]
    }
    x = x.astype("float64")
    q = numpy_rope(np.einsum("btd,ndh->btnh", x, kernel["q"]))
    k = numpy_rope(np.einsum("bsd,kdh->bskh", x, kernel["k"]))
    v = np.einsum("bsd,kdh->bskh", x, kernel["v"])
    hidden_dim = x.shape[-1]
    num_query_heads = layer.num_query_heads
    if options.get("query_head_dim_normalize", True):
        q = q / np.sqrt(layer.head_dim)
    else:
        q = q / np.sqrt(hidden_dim // num_query_heads)
    seq = x.shape[1]
    allowed = mask.astype(bool)
    window = options.get("sliding_window_size")
    if window is not None:
        i, j = np.arange(seq)[:, None], np.arange(seq)[None, :]
        allowed = allowed & (np.abs(i - j) < window)
    group = num_query_heads // layer.num_key_value_heads
    cap = options.get("logit_soft_cap")
    heads = np.zeros(q.shape)
    for n in range(num_query_heads):
        logits = np.einsum("bth,bsh->bts", q[:, :, n], k[:, :, n // group])
        if cap is not None:
            logits = cap * np.tanh(logits / cap)
        logits = np.where(allowed, logits, -np.inf)
        with np.errstate(invalid="ignore"):  # rows with no allowed keys
            weights = np.exp(logits - logits.max(-1, keepdims=True))
            weights = weights / weights.sum(-1, keepdims=True)
        heads[:, :, n] = np.einsum("bts,bsh->bth", weights, v[:, :, n // group])
    heads = np.where(mask.any(-1)[:, :, None, None], heads, 0.0)
    return np.einsum("btnh,nhd->btd", heads, kernel["o"])


@pytest.mark.parametrize(
    "num_query_heads,num_key_value_heads,options",
    [
        (4, 1, {}),
        (4, 2, {"logit_soft_cap": 0.7}),
        (4, 4, {"sliding_window_size": 2}),
        (
            6,
            2,
            {
                "logit_soft_cap": 2.0,
                "sliding_window_size": 3,
                "query_head_dim_normalize": False,
            },
        ),
    ],
)
def test_attention_matches_numpy(num_query_heads, num_key_value_heads, options):
    rng = np.random.default_rng(3)
    batch, seq, hidden = 2, 7, 24
    layer = gemma_attention(
        hidden, num_query_heads, num_key_value_heads, 4, **options
    )
    layer.build((batch, seq, hidden))
    for dense in (
        layer.query_dense,
        layer.key_dense,
        layer.value_dense,
        layer.output_dense,
    ):
        shape = dense.kernel.shape
        dense.kernel.assign(rng.normal(0, 0.6, shape).astype("float32"))
    x = rng.normal(size=(batch, seq, hidden)).astype("float32")
    causal = np.tril(np.ones((seq, seq), bool))
    padding = np.ones((batch, seq), bool)
    padding[0, :2] = False
    mask = causal[None] & padding[:, None, :]

    actual = ops.convert_to_numpy(layer(x, attention_mask=mask))
    expected = numpy_attention(layer, x, mask, options)
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-5)
    np.testing.assert_array_equal(actual[0, :2], 0.0)  # no attended keys


def count_params(config):
    """Closed-form parameter count of a GemmaBackbone config."""
    hidden = config["hidden_dim"]
    heads = config["num_query_heads"] + config["num_key_value_heads"]
    attention = (heads + config["num_query_heads"]) * hidden
    attention = attention * config["head_dim"]
    # The "q" heads appear twice: query and attention_output kernels; the
    # key/value heads twice: key and value kernels.
    attention += config["num_key_value_heads"] * hidden * config["head_dim"]
    ffw = 3 * hidden * (config["intermediate_dim"] // 2)
    norms = (
        2
        + config.get("use_post_attention_norm", False)
        + config.get("use_post_ffw_norm", False)
    ) * hidden
    block = attention + ffw + norms
    embedding = config["vocabulary_size"] * hidden
    return embedding + config["num_layers"] * block + hidden


@pytest.mark.parametrize("gemma_2", [False, True])
@pytest.mark.parametrize("heads", ["mqa_8_1", "gqa_8_4"])
def test_param_count_formula(heads, gemma_2):
    config = make_config(heads, gemma_2)
    assert GemmaBackbone(**config).count_params() == count_params(config)


def test_gemma_2b_param_count():
    gemma_2b = GemmaBackbone.presets["gemma_2b_en"]
    assert count_params(gemma_2b) == 2_506_172_416
