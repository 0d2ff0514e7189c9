"""Attention over shared key/value heads (multi-head, grouped, multi-query).

Long sequences are attended in chunks of queries on JAX: without a fused
kernel XLA materializes the `(batch, heads, queries, keys)` scores and
keeps them for the backward pass, quadratic in the length (at 8k tokens
they outweigh every other activation). Chunks of `QUERY_CHUNK` queries
(`keras_nlp.distribution.activations`) run in a scan, each recomputed in
the backward pass (`keras.remat`), so only one chunk's scores exist at a
time. Every query still sees every key (masks, biases, soft caps and sinks
per chunk), so the result is the same.
"""

import keras
from keras import ops

from keras_nlp.distribution.activations import query_chunk

# Fill value for masked logits; exp() of it underflows to exactly zero.
_MASKED_LOGIT = -1e9


def grouped_query_attention(
    query,
    key,
    value,
    mask=None,
    logit_soft_cap=None,
    probabilities_dropout=None,
    training=None,
    bias=None,
    sinks=None,
):
    """Attention of `N` query heads over `K` shared key/value heads.

    Each key/value head serves `N // K` consecutive query heads. Without a
    soft cap, dropout or sinks this is `keras.ops.dot_product_attention`
    (fused kernels where the backend has them); otherwise logits are
    computed explicitly and the softmax runs in float32. On JAX, more than
    `QUERY_CHUNK` queries (a multiple of it) are attended in chunks (see
    the module docstring), unless dropout is active.

    Args:
        query: `(batch, query_len, N, head_dim)`, already scaled.
        key: `(batch, key_len, K, head_dim)`, `K` dividing `N`.
        value: same shape as `key`.
        mask: optional boolean `(batch, query_len, key_len)`; `True` where a
            query may attend to a key.
        logit_soft_cap: optional float; logits become
            `cap * tanh(logits / cap)`.
        probabilities_dropout: optional `keras.layers.Dropout` applied to
            the attention probabilities when `training` is true.
        training: bool, whether dropout is active.
        bias: optional float tensor of shape `(batch or 1, N, query_len,
            key_len)` added to the logits (e.g. ALiBi's per-head linear
            position bias).
        sinks: optional `(N,)` logits, one per query head, of an extra key
            that every query sees and that has no value (GPT-OSS's
            attention sinks): it joins the softmax's denominator, so a
            query's weights on the real keys sum to less than one, and to
            zero when the mask hides every key.

    Returns:
        `(batch, query_len, N, head_dim)`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers import grouped_query_attention

    query = np.random.rand(2, 5, 8, 16).astype("float32")
    key = value = np.random.rand(2, 5, 2, 16).astype("float32")
    grouped_query_attention(query, key, value).shape  # (2, 5, 8, 16)
    ```
    """
    use_dropout = bool(training) and probabilities_dropout is not None
    chunk = None if use_dropout else query_chunk(query.shape[1])
    if chunk is not None:
        return _attend_in_chunks(
            query, key, value, mask, bias, chunk, logit_soft_cap, sinks
        )
    return _attend(
        query,
        key,
        value,
        mask,
        logit_soft_cap,
        probabilities_dropout if use_dropout else None,
        training,
        bias,
        sinks,
    )


def _attend_in_chunks(query, key, value, mask, bias, chunk, cap, sinks):
    """`_attend` over chunks of `chunk` queries, one chunk's scores at a
    time, each recomputed for the backward pass."""
    length = query.shape[1]
    count = length // chunk

    # Chunk i holds queries i, i + count, i + 2 count, ...: each spans the
    # whole sequence, so a sequence split over devices (a context axis)
    # splits every chunk the same way and no chunk moves between devices.
    def split(x, axis):
        # (..., length, ...) -> (count, ..., chunk, ...)
        shape = list(ops.shape(x))
        shape[axis : axis + 1] = [chunk, count]
        return ops.moveaxis(ops.reshape(x, shape), axis + 1, 0)

    pieces = {"query": split(query, 1)}
    if mask is not None:
        pieces["mask"] = split(mask, 1)
    if bias is not None:
        bias_shape = ops.shape(bias)
        if bias_shape[2] == 1:
            bias = ops.broadcast_to(
                bias, (*bias_shape[:2], length, bias_shape[3])
            )
        pieces["bias"] = split(bias, 2)

    @keras.remat
    def attend_chunk(piece):
        return _attend(
            piece["query"],
            key,
            value,
            piece.get("mask"),
            cap,
            None,
            False,
            piece.get("bias"),
            sinks,
        )

    def step(carry, piece):
        return carry, attend_chunk(piece)

    _, outputs = ops.scan(step, ops.zeros(()), pieces)
    # (count, batch, chunk, N, head_dim) -> (batch, length, N, head_dim)
    outputs = ops.moveaxis(outputs, 0, 2)
    shape = ops.shape(outputs)
    return ops.reshape(outputs, (shape[0], length, *shape[3:]))


def _attend(
    query,
    key,
    value,
    mask,
    logit_soft_cap,
    probabilities_dropout,
    training,
    bias,
    sinks,
):
    """Attention of the whole query sequence at once."""
    use_dropout = probabilities_dropout is not None
    if logit_soft_cap is None and not use_dropout and sinks is None:
        num_query_heads, num_kv_heads = query.shape[2], key.shape[2]
        if (
            keras.config.backend() == "tensorflow"
            and num_kv_heads == 1
            and num_query_heads > 1
        ):
            # Keras's TensorFlow `dot_product_attention` only expands shared
            # key/value heads when there are more than one.
            key = ops.repeat(key, num_query_heads, axis=2)
            value = ops.repeat(value, num_query_heads, axis=2)
        return ops.dot_product_attention(
            query,
            key,
            value,
            bias=bias,
            mask=None if mask is None else mask[:, None, :, :],
            scale=1.0,
        )

    batch, query_len, num_query_heads, head_dim = ops.shape(query)
    num_kv_heads = key.shape[2]
    groups = num_query_heads // num_kv_heads
    # Consecutive query heads share a key/value head: n = k * groups + g.
    query = ops.reshape(
        query, (batch, query_len, num_kv_heads, groups, head_dim)
    )
    logits = ops.cast(ops.einsum("btkgh,bskh->bkgts", query, key), "float32")
    if logit_soft_cap is not None:
        cap = ops.cast(logit_soft_cap, "float32")
        logits = ops.tanh(logits / cap) * cap
    if bias is not None:
        bias = ops.cast(bias, "float32")
        bias_shape = ops.shape(bias)
        bias = ops.reshape(
            bias,
            (bias_shape[0], num_kv_heads, groups, bias_shape[2], bias_shape[3]),
        )
        logits = logits + bias
    if mask is not None:
        logits = ops.where(mask[:, None, None, :, :], logits, _MASKED_LOGIT)
    if sinks is None:
        probabilities = ops.softmax(logits, axis=-1)
    else:
        sinks = ops.reshape(
            ops.cast(sinks, "float32"), (1, num_kv_heads, groups, 1, 1)
        )
        normalizer = ops.logaddexp(
            ops.logsumexp(logits, axis=-1, keepdims=True), sinks
        )
        probabilities = ops.exp(logits - normalizer)
    probabilities = ops.cast(probabilities, value.dtype)
    if use_dropout:
        probabilities = probabilities_dropout(probabilities, training=training)
    outputs = ops.einsum("bkgts,bskh->btkgh", probabilities, value)
    return ops.reshape(outputs, (batch, query_len, num_query_heads, head_dim))
