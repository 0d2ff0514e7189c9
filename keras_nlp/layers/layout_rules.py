"""Layout rules for the weights of the shared layers.

A backbone's `_layout_rules(config)` composes these with the path prefix of
each layer, so the orientation of every shared kernel is written once:

```python
@staticmethod
def _layout_rules(config):
    block = r"transformer_layer_\\d+/"
    return [
        *token_embedding_rules("token_embedding/", tied=False),
        *attention_rules(block + "self_attention/"),
        *feedforward_rules(block),
    ]
```
"""

from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import MODEL
from keras_nlp.layers.cached_attention import DEFAULT_SUBLAYER_NAMES
from keras_nlp.layers.decoder_layer import (
    DEFAULT_SUBLAYER_NAMES as FEEDFORWARD_NAMES,
)
from keras_nlp.layers.sparse_moe import DEFAULT_SUBLAYER_NAMES as MOE_NAMES


def token_embedding_rules(prefix, tied):
    """`keras.layers.ReversibleEmbedding` weights under `prefix`.

    The vocabulary goes on the model axis, or the hidden dimension when the
    vocabulary does not divide (e.g. GPT-2's 50257); when the vocabulary
    divides neither axis, hidden is spread over both. The untied output
    projection `(hidden, vocab)` mirrors it.
    """
    specs = [(MODEL, DATA), (DATA, MODEL), (None, (DATA, MODEL))]
    rules = [(prefix + "embeddings", specs, ("vocab", "hidden"))]
    if not tied:
        rules.append(
            (
                prefix + "reverse_embeddings",
                [tuple(reversed(spec)) for spec in specs],
                ("hidden", "vocab"),
            )
        )
    return rules


def attention_rules(
    prefix,
    sublayer_names=None,
    use_bias=False,
    flat_output_kernel=False,
):
    """`CachedGroupedQueryAttention` weights under `prefix`.

    Heads go on the model axis and hidden on the data axis; head_dim is
    never sharded, so key/value heads that the model axis does not divide
    are replicated along it (the plan's reason names `kv_heads`).
    """
    names = {**DEFAULT_SUBLAYER_NAMES, **(sublayer_names or {})}
    query, key, value, output = (
        names[kind] for kind in ("query", "key", "value", "output")
    )
    rules = [
        (
            prefix + f"{query}/kernel",
            (DATA, MODEL, None),
            ("hidden", "heads", "head_dim"),
        ),
        (
            prefix + f"({key}|{value})/kernel",
            (DATA, MODEL, None),
            ("hidden", "kv_heads", "head_dim"),
        ),
    ]
    if flat_output_kernel:
        # Input is the concatenated heads: sharded like the heads.
        rules.append(
            (prefix + f"{output}/kernel", (MODEL, DATA), ("heads", "hidden"))
        )
    else:
        rules.append(
            (
                prefix + f"{output}/kernel",
                (MODEL, None, DATA),
                ("heads", "head_dim", "hidden"),
            )
        )
    if use_bias:
        bias_spec = (MODEL, None)
        rules += [
            (prefix + f"{query}/bias", bias_spec, ("heads", "head_dim")),
            (
                prefix + f"({key}|{value})/bias",
                bias_spec,
                ("kv_heads", "head_dim"),
            ),
        ]
    return rules


def feedforward_rules(prefix, sublayer_names=None, gated=True):
    """`DecoderLayer` feed-forward kernels under `prefix` (the block).

    The feed-forward width goes on the model axis, hidden on the data axis.
    """
    names = {**FEEDFORWARD_NAMES, **(sublayer_names or {})}
    inputs = names["intermediate"]
    if gated:
        inputs = f"({names['intermediate']}|{names['gate']})"
    return [
        (prefix + f"{inputs}/kernel", (DATA, MODEL), ("hidden", "ffw")),
        (
            prefix + f"{names['output']}/kernel",
            (MODEL, DATA),
            ("ffw", "hidden"),
        ),
    ]


def sparse_moe_rules(
    prefix, sublayer_names=None, fused_gate_intermediate=False
):
    """Layout rules of a `SparseMoE` under `prefix` (its path, with `/`).

    Experts go on the model axis along the expert dimension, and their
    feed-forward width when the expert count does not divide it; hidden
    goes on the data axis. The router `(hidden, experts)` is small and read
    by every token: it is declared replicated.
    """
    names = {**MOE_NAMES, **(sublayer_names or {})}
    experts = prefix + names["experts"] + "/"
    inputs = names["gate"]
    if not fused_gate_intermediate:
        inputs = f"({names['gate']}|{names['intermediate']})"
    return [
        (
            prefix + names["router"] + "/kernel",
            (None, None),
            ("hidden", "experts"),
        ),
        (
            experts + inputs,
            [(MODEL, DATA, None), (None, DATA, MODEL)],
            ("experts", "hidden", "ffw"),
        ),
        (
            experts + names["output"],
            [(MODEL, None, DATA), (None, MODEL, DATA)],
            ("experts", "ffw", "hidden"),
        ),
    ]
