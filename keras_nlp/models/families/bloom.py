"""The Bloom-style decoder stack: BLOOM and Falcon.

A tied token embedding with no position embedding, then GPT-style
pre-LayerNorm blocks (`gpt.build_gpt_blocks`) whose multi-head attention adds
ALiBi position biases to its logits and projects the concatenated heads
back through a flat `(heads * head_dim, hidden)` kernel, then a final
LayerNorm. The members differ only in the arguments of
`build_bloom_style`: BLOOM layer-normalizes the embeddings, Falcon scales
the ALiBi bias with the queries and has a second dropout rate; the
activation, initializer and checkpoint names differ too. Falcon 7B/40B
replace ALiBi by a rotary embedding, share key/value heads, drop the
biases and run parallel residuals (with one norm or two).
"""

import functools

import keras

from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.rotary_embedding import RotaryEmbedding
from keras_nlp.layers.token_and_position_embedding import token_embedding
from keras_nlp.models.construction import COMMON_ARGUMENTS
from keras_nlp.models.construction import builder_from
from keras_nlp.models.construction import check_heads_divide
from keras_nlp.models.families.gpt import BLOCK
from keras_nlp.models.families.gpt import build_gpt_blocks

# The attention projections' names in BLOOM and Falcon checkpoints.
ATTENTION_NAMES = {
    "query": "query_dense",
    "key": "key_dense",
    "value": "value_dense",
    "output": "output_dense",
}


def bloom_embeddings(
    backbone,
    *,
    vocabulary_size,
    hidden_dim,
    initializer,
    layer_norm,
    layer_norm_epsilon,
    dtype,
):
    """Adds `token_embedding` (and `embeddings_layer_norm`) to `backbone`.

    Args:
        backbone: the backbone being constructed.
        vocabulary_size, hidden_dim, layer_norm_epsilon, dtype: as in
            `build_bloom_style`.
        initializer: initializer of the token table.
        layer_norm: bool. Layer-normalize the token embeddings (BLOOM's
            `embedding_layernorm`).

    Returns:
        A callable mapping the token ids to the first hidden states.
    """
    backbone.token_embedding = token_embedding(
        vocabulary_size,
        hidden_dim,
        initializer=initializer,
        dtype=dtype,
    )
    if not layer_norm:
        return backbone.token_embedding
    backbone.embeddings_layer_norm = keras.layers.LayerNormalization(
        epsilon=layer_norm_epsilon,
        dtype=dtype,
        name="embedding_layernorm",
    )

    def embed(token_ids):
        return backbone.embeddings_layer_norm(
            backbone.token_embedding(token_ids)
        )

    return embed


def bloom_attention(
    name,
    *,
    num_heads,
    num_key_value_heads,
    rotary_max_wavelength,
    scale_alibi,
    use_bias,
    dropout,
    dtype,
):
    """One block's attention: ALiBi, or rotary with a wavelength given.

    Args:
        name: the layer's name.
        num_heads, num_key_value_heads, rotary_max_wavelength, scale_alibi,
            use_bias, dropout, dtype: as in `build_bloom_style`.
    """
    rotary = rotary_max_wavelength is not None
    return CachedGroupedQueryAttention(
        num_query_heads=num_heads,
        num_key_value_heads=num_key_value_heads or num_heads,
        rotary_embedding=(
            RotaryEmbedding(max_wavelength=rotary_max_wavelength)
            if rotary
            else None
        ),
        use_bias=use_bias,
        use_output_bias=use_bias,
        flat_output_kernel=True,
        use_alibi=not rotary,
        scale_alibi=scale_alibi and not rotary,
        zero_unattended_queries=True,
        dropout=dropout,
        sublayer_names=ATTENTION_NAMES,
        dtype=dtype,
        name=name,
    )


def build_bloom_style(
    backbone,
    *,
    vocabulary_size,
    num_layers,
    num_heads,
    hidden_dim,
    intermediate_dim,
    activation,
    layer_norm_epsilon,
    dropout,
    embeddings_initializer,
    attention_name,
    block_names,
    feedforward_dropout=None,
    scale_alibi=False,
    embeddings_layer_norm=False,
    heads_argument="num_heads",
    num_key_value_heads=None,
    rotary_max_wavelength=None,
    use_bias=True,
    parallel_residual=False,
    shared_norm=False,
    dtype=None,
    **kwargs,
):
    """Builds a Bloom-style stack into `backbone` and initializes its graph.

    Checks that the heads divide `hidden_dim`, then sets
    `backbone.token_embedding`, `backbone.embeddings_layer_norm` (when asked
    for), `backbone.transformer_layers` and `backbone.layer_norm`
    (`final_layernorm`), with the checkpoints' names.

    Args:
        backbone: the backbone being constructed.
        vocabulary_size, num_layers, num_heads, hidden_dim,
            intermediate_dim, layer_norm_epsilon: as in `BloomBackbone`.
        activation: str, the feed-forward activation.
        dropout: float. Dropout on the attention probabilities and on the
            attention branch's output.
        embeddings_initializer: initializer of the token table.
        attention_name: the attention layer's name in each block.
        block_names: `DecoderBlock` `sublayer_names` of the checkpoint.
        feedforward_dropout: float or `None` (`dropout`). Dropout on the
            feed-forward branch's output.
        scale_alibi: bool. Scale the ALiBi bias by `1 / sqrt(head_dim)`
            along with the logits (Falcon).
        embeddings_layer_norm: bool. Layer-normalize the token embeddings
            (BLOOM's `embedding_layernorm`).
        heads_argument: the backbone's name for `num_heads`, as error
            messages call it.
        num_key_value_heads: int or `None` (`num_heads`). Key/value heads
            shared by consecutive groups of query heads.
        rotary_max_wavelength: float or `None`. If set, a rotary embedding
            of this base wavelength on every query and key feature
            replaces ALiBi.
        use_bias: bool. Biases on every attention and feed-forward
            projection.
        parallel_residual, shared_norm: as in `DecoderBlock`.
        dtype: dtype or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (`name`, ...).
    """
    check_heads_divide(hidden_dim, num_heads, heads_argument)
    embed = bloom_embeddings(
        backbone,
        vocabulary_size=vocabulary_size,
        hidden_dim=hidden_dim,
        initializer=embeddings_initializer,
        layer_norm=embeddings_layer_norm,
        layer_norm_epsilon=layer_norm_epsilon,
        dtype=dtype,
    )
    attention = functools.partial(
        bloom_attention,
        attention_name,
        num_heads=num_heads,
        num_key_value_heads=num_key_value_heads,
        rotary_max_wavelength=rotary_max_wavelength,
        scale_alibi=scale_alibi,
        use_bias=use_bias,
        dropout=dropout,
        dtype=dtype,
    )
    build_gpt_blocks(
        backbone,
        embed,
        attention,
        num_layers=num_layers,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        activation=activation,
        dropout=dropout,
        feedforward_dropout=feedforward_dropout,
        layer_norm_epsilon=layer_norm_epsilon,
        block_names=block_names,
        final_norm_name="final_layernorm",
        use_bias=use_bias,
        parallel_residual=parallel_residual,
        shared_norm=shared_norm,
        dtype=dtype,
        **kwargs,
    )


# `build_bloom_style` with a backbone constructor's own arguments:
# `build_bloom_style_from(self, locals(), activation=...)`.
build_bloom_style_from = builder_from(
    build_bloom_style,
    (
        *COMMON_ARGUMENTS,
        "layer_norm_epsilon",
        "num_key_value_heads",
        "rotary_max_wavelength",
        "use_bias",
        "parallel_residual",
    ),
)


def bloom_block_rules(attention_name, block_names, use_bias=True):
    """Layout rules of `build_bloom_style`'s blocks, named as there."""
    return [
        *attention_rules(
            BLOCK + attention_name + "/",
            sublayer_names=ATTENTION_NAMES,
            use_bias=use_bias,
            flat_output_kernel=True,
        ),
        *feedforward_rules(BLOCK, sublayer_names=block_names, gated=False),
    ]
