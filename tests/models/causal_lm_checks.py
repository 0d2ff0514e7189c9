"""Helpers the causal LM tests share: weights that make generation
sensitive, a cache-free greedy reference, and the generated tokens."""

import keras
import numpy as np


def sensitive(backbone, seed, embedding_scale=1.0):
    """Random weights under which a continuation depends on its context.

    Kernels are drawn at 6 times the spread of their initial values (sharp
    attention whose output outweighs the embeddings), embeddings at
    `embedding_scale` times theirs; constants (norm scales, biases) are
    moved by N(0, 0.1). At their initial values (or with every weight
    drawn alike), tiny models tend to repeat one token whatever the
    prompt, and a wrong mask or position goes unseen.
    """
    rng = np.random.default_rng(seed)
    for variable in backbone.weights:
        value = keras.ops.convert_to_numpy(variable.value)
        if np.all(value == value.flat[0]):
            value = value + rng.normal(0.0, 0.1, value.shape)
        else:
            scale = embedding_scale if "embedding" in variable.path else 6.0
            value = rng.normal(0.0, scale * value.std(), value.shape)
        variable.assign(value.astype(variable.dtype))
    return backbone


def greedy_full_forward(model, prompts, total):
    """Each prompt continued alone to `total` tokens, greedily, by full
    forward passes over the growing sequence (no cache).

    Every row starts at slot 0 (as alone) and is followed by zeros: the
    model is causal, so they never change the logits of earlier slots.
    One compiled forward pass of shape `(rows, total)` serves every step.
    """
    tokens = np.zeros((len(prompts), total), "int32")
    lengths = [len(prompt) for prompt in prompts]
    for row, prompt in enumerate(prompts):
        tokens[row, : len(prompt)] = prompt
    while min(lengths) < total:
        logits = model.predict(
            {"token_ids": tokens, "padding_mask": np.ones_like(tokens)},
            verbose=0,
        )
        for row, length in enumerate(lengths):
            if length < total:
                tokens[row, length] = np.argmax(logits[row, length - 1])
                lengths[row] += 1
    return tokens


def generated(output, prompts):
    """Each row's generated tokens (after its prompt, where mask is 1)."""
    rows = []
    for row, prompt in enumerate(prompts):
        real = output["token_ids"][row][output["padding_mask"][row] == 1]
        rows.append(real[len(prompt) :].tolist())
    return rows
