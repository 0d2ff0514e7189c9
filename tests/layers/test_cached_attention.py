"""CachedGroupedQueryAttention: cache, window, ALiBi, norms, errors."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_nlp.distribution.dims import declared_dims
from keras_nlp.layers import CachedGroupedQueryAttention
from keras_nlp.layers import RotaryEmbedding
from keras_nlp.layers import ZeroCenteredRMSNormalization
from keras_nlp.layers import alibi_slopes
from keras_nlp.layers import decoder_attention_mask
from keras_nlp.layers.cached_attention import KERNEL_DIMS

HIDDEN = 32
LENGTH = 7


def make_inputs(seed=0, batch=2, length=LENGTH):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(batch, length, HIDDEN)).astype("float32")


def numpy(x):
    return ops.convert_to_numpy(x)


def full_and_step_by_step(layer, inputs):
    """Outputs of one causal call and of decoding token by token."""
    batch, length, _ = inputs.shape
    mask = decoder_attention_mask(batch, length, length)
    full = numpy(layer(inputs, attention_mask=mask))
    head_dim = layer._head_dim
    cache = np.zeros(
        (batch, 2, length, layer.num_key_value_heads, head_dim), "float32"
    )
    steps = []
    for t in range(length):
        step_mask = decoder_attention_mask(batch, 1, length, start_index=t)
        output, cache = layer(
            inputs[:, t : t + 1],
            attention_mask=step_mask,
            cache=cache,
            cache_update_index=t,
        )
        steps.append(numpy(output))
    return full, np.concatenate(steps, axis=1)


OPTIONS = {
    "gqa_rope": dict(num_key_value_heads=2, rotary_embedding=RotaryEmbedding),
    "mqa_window": dict(
        num_key_value_heads=1,
        rotary_embedding=RotaryEmbedding,
        sliding_window_size=3,
    ),
    "mha_alibi_bias": dict(
        num_key_value_heads=4,
        use_alibi=True,
        use_bias=True,
        use_output_bias=True,
        flat_output_kernel=True,
    ),
    "qk_norm_soft_cap": dict(
        num_key_value_heads=2,
        rotary_embedding=RotaryEmbedding,
        use_query_key_norm=True,
        logit_soft_cap=2.0,
    ),
    # Gemma 2 and 3.
    "heads_first_gemma": dict(
        num_key_value_heads=2,
        rotary_embedding=RotaryEmbedding,
        heads_first=True,
        use_query_key_norm=True,
        zero_centered_query_key_norm=True,
        sliding_window_size=3,
        logit_soft_cap=2.0,
        zero_unattended_queries=True,
    ),
    # GPT-OSS: sinks, a window, biases on all four projections.
    "sinks_window_bias": dict(
        num_key_value_heads=2,
        rotary_embedding=RotaryEmbedding,
        use_sinks=True,
        sliding_window_size=3,
        use_bias=True,
        use_output_bias=True,
    ),
    # Qwen 3.5's full attention: a gate per query feature, half of each
    # head rotated, zero-centered norms, a window.
    "gated_partial_rope": dict(
        num_key_value_heads=2,
        rotary_embedding=RotaryEmbedding,
        gated_query=True,
        rotary_dim=4,
        use_query_key_norm=True,
        zero_centered_query_key_norm=True,
        sliding_window_size=3,
    ),
}


def make_layer(name):
    options = dict(OPTIONS[name])
    if "rotary_embedding" in options:
        options["rotary_embedding"] = options["rotary_embedding"]()
    return CachedGroupedQueryAttention(num_query_heads=4, **options)


@pytest.mark.parametrize("name", list(OPTIONS))
def test_decoding_into_a_cache_equals_one_causal_call(name):
    keras.utils.set_random_seed(0)
    full, steps = full_and_step_by_step(make_layer(name), make_inputs())
    np.testing.assert_allclose(steps, full, atol=1e-5)


def test_sliding_window_hides_keys_outside_the_window():
    keras.utils.set_random_seed(0)
    layer = make_layer("mqa_window")
    inputs = make_inputs()
    mask = decoder_attention_mask(2, LENGTH, LENGTH)
    before = numpy(layer(inputs, attention_mask=mask))
    changed = inputs.copy()
    changed[:, 0] += 10.0
    after = numpy(layer(changed, attention_mask=mask))
    # Window 3: position t sees t-2..t, so token 0 reaches positions 0..2.
    assert not np.allclose(before[:, 2], after[:, 2])
    np.testing.assert_allclose(before[:, 3:], after[:, 3:], atol=1e-6)


def test_alibi_slopes_follow_the_paper():
    np.testing.assert_allclose(alibi_slopes(8), [2.0**-i for i in range(1, 9)])
    # 6 heads: the 4 slopes of 4 heads, then every other slope of 8 heads.
    np.testing.assert_allclose(
        alibi_slopes(6), [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    )


def test_alibi_attention_matches_a_numpy_reference():
    keras.utils.set_random_seed(0)
    layer = CachedGroupedQueryAttention(
        num_query_heads=6, num_key_value_heads=6, use_alibi=True
    )
    inputs = make_inputs()[:1]
    mask = decoder_attention_mask(1, LENGTH, LENGTH)
    actual = numpy(layer(inputs, attention_mask=mask))

    def project(dense):
        return np.einsum("btd,dnh->btnh", inputs, numpy(dense.kernel))

    query, key, value = (
        project(d)
        for d in (layer.query_dense, layer.key_dense, layer.value_dense)
    )
    head_dim = HIDDEN // 6
    logits = np.einsum("btnh,bsnh->bnts", query, key) / np.sqrt(head_dim)
    positions = np.arange(LENGTH)
    slopes = np.array(alibi_slopes(6))[:, None, None]
    logits = logits + slopes * (positions[None, :] - positions[:, None])
    logits = np.where(positions[None, :] <= positions[:, None], logits, -1e9)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    heads = np.einsum("bnts,bsnh->btnh", weights, value)
    expected = np.einsum(
        "btnh,nhd->btd", heads, numpy(layer.output_dense.kernel)
    )
    np.testing.assert_allclose(actual, expected, atol=1e-5)


def test_sinks_join_each_query_softmax_denominator():
    keras.utils.set_random_seed(0)
    layer = CachedGroupedQueryAttention(
        4, 2, use_sinks=True, sliding_window_size=3, name="attention"
    )
    inputs = make_inputs()
    # Row 0's first two tokens are padding: its query 0 sees no key.
    padding = np.ones((2, LENGTH), "int32")
    padding[0, :2] = 0
    mask = decoder_attention_mask(2, LENGTH, LENGTH, padding_mask=padding)
    layer.build(inputs.shape)
    assert tuple(layer.sinks.shape) == (4,)
    assert layer.sinks.path == "attention/sinks"
    sinks = np.array([-1.0, 0.5, 2.0, 0.0], "float32")
    layer.sinks.assign(sinks)
    actual = numpy(layer(inputs, attention_mask=mask))

    def project(dense):
        return np.einsum("btd,dnh->btnh", inputs, numpy(dense.kernel))

    query = project(layer.query_dense)
    # Query heads 2k and 2k+1 share key/value head k.
    key, value = (
        np.repeat(project(d), 2, axis=2)
        for d in (layer.key_dense, layer.value_dense)
    )
    logits = np.einsum("btnh,bsnh->bnts", query, key) / np.sqrt(HIDDEN // 4)
    distance = np.arange(LENGTH)[:, None] - np.arange(LENGTH)[None, :]
    visible = numpy(mask)[:, None] & (distance < 3)
    logits = np.where(visible, logits, -np.inf)
    top = np.maximum(logits.max(-1, keepdims=True), sinks[:, None, None])
    weights = np.exp(logits - top)
    weights /= weights.sum(-1, keepdims=True) + np.exp(
        sinks[:, None, None] - top
    )
    heads = np.einsum("bnts,bsnh->btnh", weights, value)
    expected = np.einsum(
        "btnh,nhd->btd", heads, numpy(layer.output_dense.kernel)
    )
    np.testing.assert_allclose(actual, expected, atol=1e-5)
    # A query that sees no key gives all its weight to the sinks.
    np.testing.assert_array_equal(actual[0, 0], 0.0)
    config = layer.get_config()
    assert config["use_sinks"] is True
    assert CachedGroupedQueryAttention.from_config(config).use_sinks


def test_explicit_and_fused_paths_agree_with_a_bias():
    # A huge soft cap is the identity but takes the explicit float32 path.
    keras.utils.set_random_seed(0)
    fused = CachedGroupedQueryAttention(8, 2, use_alibi=True)
    explicit = CachedGroupedQueryAttention(
        8, 2, use_alibi=True, logit_soft_cap=1e7
    )
    inputs = make_inputs()
    mask = decoder_attention_mask(2, LENGTH, LENGTH)
    expected = numpy(fused(inputs, attention_mask=mask))
    explicit(inputs, attention_mask=mask)
    explicit.set_weights(fused.get_weights())
    np.testing.assert_allclose(
        numpy(explicit(inputs, attention_mask=mask)), expected, atol=1e-5
    )


def test_kernel_shapes_and_names():
    layer = CachedGroupedQueryAttention(
        4,
        2,
        head_dim=6,
        use_bias=True,
        use_query_key_norm=True,
        flat_output_kernel=True,
        sublayer_names={"query": "query_dense", "output": "output_dense"},
        name="attention",
    )
    layer.build((None, None, HIDDEN))
    assert {v.path: tuple(v.shape) for v in layer.weights} == {
        "attention/query_dense/kernel": (HIDDEN, 4, 6),
        "attention/query_dense/bias": (4, 6),
        "attention/key/kernel": (HIDDEN, 2, 6),
        "attention/key/bias": (2, 6),
        "attention/value/kernel": (HIDDEN, 2, 6),
        "attention/value/bias": (2, 6),
        "attention/output_dense/kernel": (24, HIDDEN),
        "attention/query_dense_layernorm/scale": (6,),
        "attention/key_dense_layernorm/scale": (6,),
    }


def test_heads_first_kernels_are_declared_and_compute_the_same():
    keras.utils.set_random_seed(0)
    layer = CachedGroupedQueryAttention(
        4, 2, head_dim=6, heads_first=True, name="attention"
    )
    inputs = make_inputs()
    mask = decoder_attention_mask(2, LENGTH, LENGTH)
    outputs = numpy(layer(inputs, attention_mask=mask))
    assert {v.path: tuple(v.shape) for v in layer.weights} == {
        "attention/query/kernel": (4, HIDDEN, 6),
        "attention/key/kernel": (2, HIDDEN, 6),
        "attention/value/kernel": (2, HIDDEN, 6),
        "attention/attention_output/kernel": (4, 6, HIDDEN),
    }
    assert declared_dims(layer) == {
        "attention/query/kernel": KERNEL_DIMS["heads_first_query"],
        "attention/key/kernel": KERNEL_DIMS["heads_first_key"],
        "attention/value/kernel": KERNEL_DIMS["heads_first_value"],
        "attention/attention_output/kernel": KERNEL_DIMS["output"],
    }
    assert KERNEL_DIMS["heads_first_key"] == ("kv_heads", "hidden", "head_dim")
    # The same weights in the Llama layout give the same outputs.
    llama = CachedGroupedQueryAttention(4, 2, head_dim=6)
    llama.build(inputs.shape)
    for ours, theirs in [
        (llama.query_dense, layer.query_dense),
        (llama.key_dense, layer.key_dense),
        (llama.value_dense, layer.value_dense),
    ]:
        ours.kernel.assign(np.transpose(numpy(theirs.kernel), (1, 0, 2)))
    llama.output_dense.kernel.assign(numpy(layer.output_dense.kernel))
    np.testing.assert_allclose(
        numpy(llama(inputs, attention_mask=mask)), outputs, atol=1e-6
    )


def test_zero_centered_query_key_norms_multiply_by_one_plus_scale():
    layer = CachedGroupedQueryAttention(
        4,
        2,
        use_query_key_norm=True,
        zero_centered_query_key_norm=True,
        sublayer_names={"query_norm": "query_norm", "key_norm": "key_norm"},
    )
    layer.build((None, None, HIDDEN))
    assert isinstance(layer.query_norm, ZeroCenteredRMSNormalization)
    assert layer.key_norm.name == "key_norm"
    # A fresh zero-centered norm (scale 0) is a plain RMS norm.
    heads = make_inputs()[..., :8]
    expected = heads / np.sqrt(np.mean(heads**2, -1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(numpy(layer.key_norm(heads)), expected, 1e-5)


def test_centered_sliding_window_looks_both_ways():
    keras.utils.set_random_seed(0)
    # Window 4: one key before the query, the query, two keys after it.
    layer = CachedGroupedQueryAttention(
        4, 2, sliding_window_size=4, centered_sliding_window=True
    )
    inputs = make_inputs()
    everything = np.ones((2, LENGTH, LENGTH), bool)
    before = numpy(layer(inputs, attention_mask=everything))
    changed = inputs.copy()
    changed[:, 3] += 10.0
    after = numpy(layer(changed, attention_mask=everything))
    moved = np.any(~np.isclose(before, after, atol=1e-6), axis=(0, 2))
    assert list(np.flatnonzero(moved)) == [1, 2, 3, 4]


def test_unattended_queries_are_judged_before_the_window():
    # Like keras-hub's Gemma: a query whose only keys lie outside the window
    # (a right-padded position) is not zeroed, one with no key at all is.
    keras.utils.set_random_seed(0)
    layer = CachedGroupedQueryAttention(
        4, 2, sliding_window_size=2, zero_unattended_queries=True
    )
    padding = np.array([[0, 1, 1, 1, 0, 0, 0]] * 2)
    mask = decoder_attention_mask(2, LENGTH, LENGTH, padding_mask=padding)
    outputs = numpy(layer(make_inputs(), attention_mask=mask))
    np.testing.assert_array_equal(outputs[:, 0], 0.0)
    assert np.all(np.abs(outputs[:, 5:]) > 0)


def test_config_round_trip_keeps_the_rotary_embedding():
    layer = CachedGroupedQueryAttention(
        4,
        2,
        rotary_embedding=RotaryEmbedding(max_wavelength=500, scaling_factor=2),
        sliding_window_size=5,
    )
    clone = CachedGroupedQueryAttention.from_config(layer.get_config())
    assert clone.rotary_embedding.max_wavelength == 500
    assert clone.rotary_embedding.scaling_factor == 2
    assert clone.get_config() == layer.get_config()
    assert "gated_query" not in layer.get_config()


def test_a_gated_query_gates_each_head_feature_after_partial_rope():
    keras.utils.set_random_seed(0)
    layer = make_layer("gated_partial_rope")
    inputs = make_inputs()
    outputs = numpy(layer(inputs))
    # The query kernel makes the query, then the gate, per head.
    assert tuple(layer.query_dense.kernel.shape) == (32, 4, 16)
    clone = CachedGroupedQueryAttention.from_config(layer.get_config())
    assert (clone.gated_query, clone.rotary_dim) == (True, 4)
    clone.build(inputs.shape)
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(numpy(clone(inputs)), outputs, atol=1e-6)
    # A zero gate kernel halves the outputs of the same attention without
    # a gate (sigmoid(0) = 1/2), whose query kernel is the first half.
    kernel = numpy(layer.query_dense.kernel)
    layer.query_dense.kernel.assign(
        np.concatenate([kernel[..., :8], 0 * kernel[..., 8:]], -1)
    )
    options = dict(OPTIONS["gated_partial_rope"], gated_query=False)
    options["rotary_embedding"] = RotaryEmbedding()
    ungated = CachedGroupedQueryAttention(num_query_heads=4, **options)
    ungated.build(inputs.shape)
    for ours, theirs in zip(ungated.weights, layer.weights, strict=True):
        ours.assign(numpy(theirs)[..., : ours.shape[-1]])
    np.testing.assert_allclose(
        numpy(layer(inputs)), 0.5 * numpy(ungated(inputs)), atol=1e-6
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_query_heads=6, num_key_value_heads=4), "must divide"),
        (dict(num_query_heads=0, num_key_value_heads=1), "num_query_heads=0"),
        (
            dict(
                num_query_heads=4,
                num_key_value_heads=2,
                sublayer_names={"q": "x"},
            ),
            "Unknown `sublayer_names` keys ['q']",
        ),
        (
            dict(num_query_heads=4, num_key_value_heads=2, rotary_dim=4),
            "with a `rotary_embedding`. Received: rotary_dim=4",
        ),
        (
            dict(
                num_query_heads=4,
                num_key_value_heads=2,
                head_dim=8,
                rotary_dim=3,
                rotary_embedding=RotaryEmbedding(),
            ),
            "`rotary_dim` must be an even number of features",
        ),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError) as info:
        CachedGroupedQueryAttention(**kwargs)
    assert message in str(info.value)


def test_cache_update_index_without_cache_is_an_error():
    layer = CachedGroupedQueryAttention(4, 2)
    with pytest.raises(ValueError, match="only meaningful with a `cache`"):
        layer(make_inputs(), cache_update_index=3)


# Query chunks: every option the attention takes, outputs and gradients
# equal to the whole-sequence attention's.
CHUNK_OPTIONS = {
    "plain": {},
    "causal_mask": {"mask": "causal"},
    "alibi_bias": {"mask": "causal", "bias": True},
    "soft_cap": {"mask": "causal", "logit_soft_cap": 5.0},
    "sinks": {"mask": "causal", "sinks": True},
}


@pytest.mark.parametrize("option", sorted(CHUNK_OPTIONS))
def test_query_chunks_equal_whole_attention(option):
    if keras.backend.backend() != "jax":
        pytest.skip("attention is chunked on JAX only")
    import jax

    from keras_nlp.distribution.activations import query_chunk
    from keras_nlp.distribution.activations import query_chunk_scope
    from keras_nlp.layers import grouped_query_attention

    rng = np.random.default_rng(0)
    query = rng.normal(size=(2, 8, 4, 16)).astype("float32")
    key = rng.normal(size=(2, 8, 2, 16)).astype("float32")
    value = rng.normal(size=(2, 8, 2, 16)).astype("float32")
    arguments = dict(CHUNK_OPTIONS[option])
    if arguments.get("mask"):
        mask = np.tril(np.ones((8, 8), bool))[None].repeat(2, 0)
        mask[0, :, :3] = False  # a left-padded row
        arguments["mask"] = mask
    if arguments.get("bias"):
        arguments["bias"] = rng.normal(size=(1, 4, 8, 8)).astype("float32")
    if arguments.get("sinks"):
        arguments["sinks"] = rng.normal(size=(4,)).astype("float32")

    def loss(query, key, value, chunk):
        with query_chunk_scope(chunk):
            outputs = grouped_query_attention(query, key, value, **arguments)
        return jax.numpy.sum(jax.numpy.asarray(outputs) ** 2), outputs

    with query_chunk_scope(2):
        assert query_chunk(8) == 2
    results = {}
    for chunk in (2, None):
        grad = jax.jit(
            jax.value_and_grad(
                lambda q, k, v, chunk=chunk: loss(q, k, v, chunk),
                argnums=(0, 1, 2),
                has_aux=True,
            )
        )
        (_, outputs), grads = grad(query, key, value)
        results[chunk] = (np.asarray(outputs), [np.asarray(g) for g in grads])
    np.testing.assert_allclose(results[2][0], results[None][0], atol=1e-5)
    for chunked, whole in zip(results[2][1], results[None][1], strict=True):
        np.testing.assert_allclose(chunked, whole, atol=1e-4)
    # The chunked program scans: one chunk's scores at a time.
    text = (
        jax.jit(lambda q, k, v: loss(q, k, v, 2)[0])
        .lower(query, key, value)
        .as_text()
    )
    assert "while" in text


def test_keys_and_values_from_a_wider_encoder():
    """`key_value_input_dim`: cross-attention whose keys and values are
    projected from inputs wider than the queries' (T5Gemma 9B-2B)."""
    layer = CachedGroupedQueryAttention(
        num_query_heads=4, num_key_value_heads=2, key_value_input_dim=48
    )
    layer.build((None, None, 32))
    assert tuple(layer.query_dense.kernel.shape) == (32, 4, 8)
    assert tuple(layer.key_dense.kernel.shape) == (48, 2, 8)
    assert tuple(layer.value_dense.kernel.shape) == (48, 2, 8)
    queries = make_inputs()[:, :3]
    sources = np.random.default_rng(1).normal(size=(2, 5, 48))
    sources = sources.astype("float32")
    outputs = layer(queries, key_value_inputs=sources)
    assert tuple(outputs.shape) == (2, 3, 32)
    # Reading the precomputed keys and values gives the same outputs.
    cached = layer(queries, key_value_cache=layer.key_value_cache(sources))
    np.testing.assert_allclose(numpy(cached), numpy(outputs), atol=1e-6)
    config = layer.get_config()
    assert config["key_value_input_dim"] == 48
    assert (
        CachedGroupedQueryAttention.from_config(config).key_value_input_dim
        == 48
    )
    # Unset, configs read as before the option existed.
    plain = CachedGroupedQueryAttention(
        num_query_heads=4, num_key_value_heads=2
    )
    assert "key_value_input_dim" not in plain.get_config()
