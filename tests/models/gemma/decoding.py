"""Runs a Gemma-style backbone token by token through its blocks' caches."""

import numpy as np
from keras import ops


def decode_step_by_step(model, inputs, prefill=2, extra_positions=2):
    """The backbone's outputs, decoding through each block's KV cache.

    The first `prefill` tokens go in one call, then one token per call,
    into caches `extra_positions` longer than the sequence.
    """
    token_ids, padding_mask = inputs["token_ids"], inputs["padding_mask"]
    batch, length = token_ids.shape
    max_length = length + extra_positions
    cache_mask = np.pad(padding_mask, ((0, 0), (0, extra_positions)), "edge")
    first = model.transformer_layers[0].attention
    cache_shape = (
        batch,
        2,
        max_length,
        first.num_key_value_heads,
        first.head_dim,
    )
    caches = [
        np.zeros(cache_shape, "float32") for _ in model.transformer_layers
    ]
    starts = [0, *range(prefill, length)]
    ends = [*starts[1:], length]
    outputs = []
    for start, end in zip(starts, ends, strict=True):
        x = model.token_embedding(token_ids[:, start:end])
        x = x * ops.sqrt(float(model.hidden_dim))
        for index, block in enumerate(model.transformer_layers):
            x, caches[index] = block(
                x,
                padding_mask=cache_mask,
                cache=caches[index],
                cache_update_index=start,
            )
        outputs.append(ops.convert_to_numpy(model.layer_norm(x)))
    return np.concatenate(outputs, axis=1)
