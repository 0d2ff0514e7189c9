"""Layout rules for the weights of the shared layers.

A backbone's `_layout_rules(config)` composes these with the path prefix of
each layer, so the sharding of every shared kernel is written once:

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

Each helper states which role shards which *named* dimension (heads on
the model axis, hidden on the data axis) and orders the spec by the
dimension names the layer declares for that variable, so a spec cannot be
transposed against its kernel; the names travel with the rule and the
resolver checks them against the built variable.
"""

from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import EXPERT
from keras_nlp.distribution.rules import MODEL
from keras_nlp.layers.cached_attention import DEFAULT_SUBLAYER_NAMES
from keras_nlp.layers.cached_attention import KERNEL_DIMS
from keras_nlp.layers.common import FEEDFORWARD_INPUT_DIMS
from keras_nlp.layers.common import FEEDFORWARD_OUTPUT_DIMS
from keras_nlp.layers.decoder_block import (
    DEFAULT_SUBLAYER_NAMES as FEEDFORWARD_NAMES,
)
from keras_nlp.layers.expert_bank import EXPERT_INPUT_DIMS
from keras_nlp.layers.expert_bank import EXPERT_OUTPUT_DIMS
from keras_nlp.layers.sparse_moe import DEFAULT_SUBLAYER_NAMES as MOE_NAMES
from keras_nlp.layers.sparse_moe import ROUTER_DIMS
from keras_nlp.layers.token_and_position_embedding import (
    POSITION_EMBEDDING_DIMS,
)
from keras_nlp.layers.token_and_position_embedding import REVERSE_EMBEDDING_DIMS
from keras_nlp.layers.token_and_position_embedding import TOKEN_EMBEDDING_DIMS

# Tensor parallelism on the heads and widths, FSDP on hidden.
_HEADS_ON_MODEL = {
    "heads": MODEL,
    "kv_heads": MODEL,
    "ffw": MODEL,
    "hidden": DATA,
}
# The vocabulary on the model axis; hidden if the vocabulary won't divide
# (e.g. GPT-2's 50257); hidden over both axes if it divides neither.
_VOCAB_ALTERNATIVES = (
    {"vocab": MODEL, "hidden": DATA},
    {"vocab": DATA, "hidden": MODEL},
    {"hidden": (DATA, MODEL)},
)


def named_rule(pattern, dims, *roles_by_name):
    """A `(regex, specs, dims)` rule whose specs follow `dims`' order.

    Args:
        pattern: the regex of the variable paths.
        dims: the variables' dimension names, as their layer declares them.
        *roles_by_name: one dict per alternative, most preferred first, of
            dimension name -> role (`MODEL`, `DATA`, a tuple, or `None`);
            names it leaves out are not sharded.

    Returns:
        A rule for `_layout_rules`.
    """
    specs = [tuple(roles.get(name) for name in dims) for roles in roles_by_name]
    return (pattern, specs if len(specs) > 1 else specs[0], dims)


def token_embedding_rules(prefix, tied):
    """`keras_nlp.layers.token_embedding` weights under `prefix`.

    The untied output projection `(hidden, vocab)` gets the same placement
    as the table, in its own orientation.
    """
    rules = [
        named_rule(
            prefix + "embeddings", TOKEN_EMBEDDING_DIMS, *_VOCAB_ALTERNATIVES
        )
    ]
    if not tied:
        rules.append(
            named_rule(
                prefix + "reverse_embeddings",
                REVERSE_EMBEDDING_DIMS,
                *_VOCAB_ALTERNATIVES,
            )
        )
    return rules


def position_embedding_rules(prefix):
    """A `PositionEmbedding` table under `prefix`.

    Rows on the model axis and hidden on the data axis, like the token
    table of a vocabulary that divides; the other way round when the rows
    do not divide.
    """
    return [
        named_rule(
            prefix + "embeddings",
            POSITION_EMBEDDING_DIMS,
            {"position": MODEL, "hidden": DATA},
            {"position": DATA, "hidden": MODEL},
        )
    ]


def attention_rules(
    prefix,
    sublayer_names=None,
    use_bias=False,
    flat_output_kernel=False,
    heads_first=False,
    hidden_if_heads_indivisible=False,
):
    """`CachedGroupedQueryAttention` weights under `prefix`.

    Heads go on the model axis and hidden on the data axis; head_dim is
    never sharded, so key/value heads that the model axis does not divide
    are replicated along it (the plan's reason names `kv_heads`). The
    layer's `flat_output_kernel` and `heads_first` options are passed on,
    as they change the kernels' orientation.

    With `hidden_if_heads_indivisible=True` a kernel whose heads the model
    axis does not divide puts its hidden dimension on both axes instead
    (a head is still never split): the encoders' 12 heads on an 8-way axis
    then cost 1/8 of the kernels per device instead of all of them, at
    the price of an all-reduce of the projections.
    """
    names = {**DEFAULT_SUBLAYER_NAMES, **(sublayer_names or {})}
    query, key, value, output = (
        names[kind] for kind in ("query", "key", "value", "output")
    )
    output_kind = "flat_output" if flat_output_kernel else "output"
    layout = "heads_first_" if heads_first else ""
    kernel_roles = [_HEADS_ON_MODEL]
    if hidden_if_heads_indivisible:
        kernel_roles.append({"hidden": (DATA, MODEL)})
    rules = [
        named_rule(
            prefix + f"{query}/kernel",
            KERNEL_DIMS[layout + "query"],
            *kernel_roles,
        ),
        named_rule(
            prefix + f"({key}|{value})/kernel",
            KERNEL_DIMS[layout + "key"],
            *kernel_roles,
        ),
        named_rule(
            prefix + f"{output}/kernel",
            KERNEL_DIMS[output_kind],
            *kernel_roles,
        ),
    ]
    if use_bias:
        rules += [
            named_rule(
                prefix + f"{query}/bias",
                ("heads", "head_dim"),
                {"heads": MODEL},
            ),
            named_rule(
                prefix + f"({key}|{value})/bias",
                ("kv_heads", "head_dim"),
                {"kv_heads": MODEL},
            ),
        ]
    return rules


def feedforward_rules(prefix, sublayer_names=None, gated=True):
    """`DecoderBlock` feed-forward kernels under `prefix` (the block).

    The feed-forward width goes on the model axis, hidden on the data axis.
    """
    names = {**FEEDFORWARD_NAMES, **(sublayer_names or {})}
    inputs = names["intermediate"]
    if gated:
        inputs = f"({names['intermediate']}|{names['gate']})"
    return [
        named_rule(
            prefix + f"{inputs}/kernel", FEEDFORWARD_INPUT_DIMS, _HEADS_ON_MODEL
        ),
        named_rule(
            prefix + f"{names['output']}/kernel",
            FEEDFORWARD_OUTPUT_DIMS,
            _HEADS_ON_MODEL,
        ),
    ]


def sparse_moe_rules(
    prefix,
    sublayer_names=None,
    fused_gate_intermediate=False,
    expert_bias_names=None,
):
    """Layout rules of a `SparseMoE` under `prefix` (its path, with `/`).

    Expert weights put the expert dimension on the `EXPERT` role (the
    expert axis, or the model axis when the mesh has none), hidden on the
    data axis and the feed-forward width on the model axis. Without an
    expert axis the model axis goes to the experts when it divides their
    count and to the width otherwise (the resolver gives one mesh axis to
    one dimension only). The router `(hidden, experts)` is small and read
    by every token: it is declared replicated.

    Args:
        prefix: the block's path, ending in `/`.
        sublayer_names: the block's `sublayer_names`, if it renames them.
        fused_gate_intermediate: bool, one fused gate/intermediate weight.
        expert_bias_names: optional `(input_bias, output_bias)` variable
            names under `experts/` of per-expert biases `(experts, ffw)`
            (the fused width when fused) and `(experts, hidden)`.
    """
    names = {**MOE_NAMES, **(sublayer_names or {})}
    experts = prefix + names["experts"] + "/"
    inputs = names["gate"]
    if not fused_gate_intermediate:
        inputs = f"({names['gate']}|{names['intermediate']})"
    roles = {"experts": EXPERT, "hidden": DATA, "ffw": MODEL}
    rules = [
        named_rule(prefix + names["router"] + "/kernel", ROUTER_DIMS, {}),
        named_rule(experts + inputs, EXPERT_INPUT_DIMS, roles),
        named_rule(experts + names["output"], EXPERT_OUTPUT_DIMS, roles),
    ]
    if expert_bias_names:
        input_bias, output_bias = expert_bias_names
        rules += [
            named_rule(experts + input_bias, ("experts", "ffw"), roles),
            named_rule(experts + output_bias, ("experts", "hidden"), roles),
        ]
    return rules
