"""The GPT-style decoder stack: GPT-2, OPT and GPT-NeoX.

A tied token embedding, learned absolute positions added to it (GPT-2,
OPT), then pre-LayerNorm blocks of multi-head attention and a plain
two-layer feed-forward, every projection with a bias, then a final
LayerNorm. The members differ only in the arguments of `build_gpt_style`:
the feed-forward activation, where the embedding tables live, embedding
dropout and the initializer (and OPT-350M's post-LayerNorm blocks and
embedding projections); GPT-NeoX brings its own attention layer and
parallel residuals instead of positions. The Bloom family (`bloom.py`)
builds its blocks with `build_gpt_blocks` too.
"""

import keras

from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.decoder_block import DecoderBlock
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.token_and_position_embedding import PositionEmbedding
from keras_nlp.layers.token_and_position_embedding import (
    TokenAndPositionEmbedding,
)
from keras_nlp.layers.token_and_position_embedding import token_embedding
from keras_nlp.models.construction import COMMON_ARGUMENTS
from keras_nlp.models.construction import builder_from
from keras_nlp.models.construction import check_dropout_rate
from keras_nlp.models.construction import check_heads_divide
from keras_nlp.models.decoder import init_decoder_graph

# The paths of the blocks, `transformer_layer_{i}/...`.
BLOCK = r"transformer_layer_\d+/"
# keras-hub's `TransformerDecoder` names a block's norms this way.
BLOCK_NAMES = {
    "attention_norm": "self_attention_layer_norm",
    "feedforward_norm": "feedforward_layer_norm",
}
# Every GPT-2 and OPT checkpoint uses this epsilon; keras-hub fixes it.
LAYER_NORM_EPSILON = 1e-5


def build_gpt_blocks(
    backbone,
    embed,
    attention,
    *,
    num_layers,
    hidden_dim,
    intermediate_dim,
    activation,
    dropout,
    feedforward_dropout=None,
    layer_norm_epsilon=LAYER_NORM_EPSILON,
    parallel_residual=False,
    kernel_initializer="glorot_uniform",
    block_names=None,
    final_norm_name="layer_norm",
    normalize_first=True,
    output_projection=None,
    use_bias=True,
    shared_norm=False,
    dtype=None,
    **kwargs,
):
    """Adds the blocks and final LayerNorm to `backbone`; wires its graph.

    The blocks `transformer_layer_{i}` are pre-LayerNorm `DecoderBlock`s
    with a plain (ungated) feed-forward whose dense layers have biases
    (unless `use_bias=False`).
    Sets `backbone.transformer_layers` and `backbone.layer_norm`.
    Post-LayerNorm blocks (`normalize_first=False`) end normalized: then
    there is no final LayerNorm and `backbone.layer_norm` is `None`.

    Args:
        backbone: the backbone being constructed.
        embed: callable mapping the token ids to the first hidden states.
        attention: callable returning a new attention layer for one block.
        num_layers: int. Number of blocks.
        hidden_dim, intermediate_dim, activation, dropout,
            feedforward_dropout, layer_norm_epsilon, parallel_residual,
            kernel_initializer: as in `DecoderBlock`.
        block_names: `DecoderBlock` `sublayer_names` of the checkpoint;
            defaults to `BLOCK_NAMES`.
        final_norm_name: the final LayerNorm's name.
        normalize_first: bool. Pre-LayerNorm blocks and a final LayerNorm
            (`True`), or post-LayerNorm blocks and none (`False`).
        output_projection: optional layer applied last (OPT-350M's
            `project_out`).
        use_bias: bool. Biases on the feed-forward dense layers.
        shared_norm: bool. As in `DecoderBlock` (Falcon-7B).
        dtype: dtype or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (`name`, ...).
    """
    backbone.transformer_layers = [
        DecoderBlock(
            attention=attention(),
            hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            activation=activation,
            gated=False,
            use_bias=use_bias,
            normalization="layer",
            layer_norm_epsilon=layer_norm_epsilon,
            parallel_residual=parallel_residual,
            dropout=dropout,
            feedforward_dropout=feedforward_dropout,
            kernel_initializer=kernel_initializer,
            sublayer_names=block_names or BLOCK_NAMES,
            normalize_first=normalize_first,
            shared_norm=shared_norm,
            dtype=dtype,
            name=f"transformer_layer_{index}",
        )
        for index in range(num_layers)
    ]
    backbone.layer_norm = None
    if normalize_first:
        backbone.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name=final_norm_name
        )
    last = [
        layer
        for layer in (backbone.layer_norm, output_projection)
        if layer is not None
    ]

    def finish(x):
        for layer in last:
            x = layer(x)
        return x

    init_decoder_graph(
        backbone,
        embed=embed,
        blocks=backbone.transformer_layers,
        final_norm=finish,
        dtype=dtype,
        **kwargs,
    )


def gpt_embeddings(
    backbone,
    *,
    vocabulary_size,
    hidden_dim,
    dropout,
    initializer,
    max_sequence_length,
    learned_positions,
    embeddings_layer,
    embeddings_dropout,
    tie_word_embeddings,
    embeddings,
    dtype,
):
    """Adds the GPT-style embedding layers to `backbone`.

    Sets `token_embedding`, `position_embedding` (or `embeddings`, holding
    both tables, or the layer given as `embeddings`) and
    `embeddings_dropout` when asked for, with the checkpoints' names.

    Args:
        backbone: the backbone being constructed.
        vocabulary_size, hidden_dim, dropout, initializer,
            max_sequence_length, dtype: as in `build_gpt_style`.
        learned_positions: bool. Add a `(max_sequence_length, hidden)`
            position table to the token embeddings.
        embeddings_layer: name of one `TokenAndPositionEmbedding` holding
            both tables (OPT), or `None` for the top-level layers
            `token_embedding` and `position_embedding` (GPT-2).
        embeddings_dropout: bool. Dropout on the summed embeddings.
        tie_word_embeddings: bool. The token table is the output
            projection; `False` adds an untied `reverse_embeddings`
            (GPT-NeoX's `embed_out`). Only for a separate token table.
        embeddings: optional layer mapping the token ids to the first
            hidden states and holding a `token_embedding` (OPT-350M's
            projected embeddings): `backbone.embeddings`, instead of the
            tables built here.

    Returns:
        `embed(token_ids, positions=None)`, the first hidden states.
    """
    if embeddings is not None:
        backbone.embeddings = embeddings
        backbone.token_embedding = embeddings.token_embedding
    elif embeddings_layer:
        backbone.embeddings = TokenAndPositionEmbedding(
            vocabulary_size=vocabulary_size,
            sequence_length=max_sequence_length,
            embedding_dim=hidden_dim,
            embeddings_initializer=initializer,
            dtype=dtype,
            name=embeddings_layer,
        )
        backbone.token_embedding = backbone.embeddings.token_embedding
    else:
        backbone.token_embedding = token_embedding(
            vocabulary_size,
            hidden_dim,
            tie_weights=tie_word_embeddings,
            dtype=dtype,
        )
        if learned_positions:
            backbone.position_embedding = PositionEmbedding(
                sequence_length=max_sequence_length,
                initializer=initializer,
                dtype=dtype,
                name="position_embedding",
            )
    if embeddings_dropout:
        backbone.embeddings_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embeddings_dropout"
        )

    def embed(token_ids, positions=None):
        # Cached decoding passes each token's position (left padding).
        at = {} if positions is None else {"positions": positions}
        if embeddings is not None or embeddings_layer:
            x = backbone.embeddings(token_ids, **at)
        else:
            x = backbone.token_embedding(token_ids)
            if learned_positions:
                x = x + backbone.position_embedding(x, **at)
        if embeddings_dropout:
            x = backbone.embeddings_dropout(x)
        return x

    return embed


def build_gpt_style(
    backbone,
    *,
    vocabulary_size,
    num_layers,
    num_heads,
    hidden_dim,
    intermediate_dim,
    activation,
    dropout,
    initializer,
    max_sequence_length=None,
    learned_positions=True,
    embeddings_layer=None,
    embeddings_dropout=True,
    tie_word_embeddings=True,
    attention=None,
    parallel_residual=False,
    layer_norm_epsilon=LAYER_NORM_EPSILON,
    embeddings=None,
    normalize_first=True,
    output_projection=None,
    dtype=None,
    **kwargs,
):
    """Builds a GPT-style stack into `backbone` and initializes its graph.

    Checks that the heads divide `hidden_dim`, that learned positions have
    a `max_sequence_length` and that `dropout` is a rate, then sets the
    embedding layers (see `gpt_embeddings`), `backbone.transformer_layers`
    and `backbone.layer_norm`, with the checkpoints' names.

    Args:
        backbone: the backbone being constructed.
        vocabulary_size, num_layers, num_heads, hidden_dim,
            intermediate_dim, max_sequence_length, dropout: as in
            `GPT2Backbone`.
        activation: str, the feed-forward activation.
        initializer: a Keras initializer of the projection kernels and the
            position table (and of the token table when `embeddings_layer`
            holds both); a separate token table draws from
            `RandomNormal(stddev=0.01)`.
        learned_positions, embeddings_layer, embeddings_dropout,
            tie_word_embeddings, embeddings: the embeddings, as in
            `gpt_embeddings`.
        attention: callable returning a new attention layer named
            `self_attention` for one block; defaults to multi-head
            `CachedGroupedQueryAttention` with biases.
        parallel_residual: bool. Attention and feed-forward both read the
            block input (GPT-NeoX).
        layer_norm_epsilon: float. Epsilon of every LayerNorm.
        normalize_first, output_projection: as in `build_gpt_blocks`.
        dtype: dtype or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (`name`, ...).
    """
    check_heads_divide(hidden_dim, num_heads)
    if learned_positions and max_sequence_length is None:
        raise ValueError(
            "Learned positions need `max_sequence_length`, a positive "
            "integer. Received: max_sequence_length=None."
        )
    check_dropout_rate(dropout)
    embed = gpt_embeddings(
        backbone,
        vocabulary_size=vocabulary_size,
        hidden_dim=hidden_dim,
        dropout=dropout,
        initializer=initializer,
        max_sequence_length=max_sequence_length,
        learned_positions=learned_positions,
        embeddings_layer=embeddings_layer,
        embeddings_dropout=embeddings_dropout,
        tie_word_embeddings=tie_word_embeddings,
        embeddings=embeddings,
        dtype=dtype,
    )

    def multi_head_attention():
        return CachedGroupedQueryAttention(
            num_query_heads=num_heads,
            num_key_value_heads=num_heads,
            use_bias=True,
            use_output_bias=True,
            dropout=dropout,
            kernel_initializer=initializer,
            dtype=dtype,
            name="self_attention",
        )

    build_gpt_blocks(
        backbone,
        embed,
        attention or multi_head_attention,
        num_layers=num_layers,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        activation=activation,
        dropout=dropout,
        layer_norm_epsilon=layer_norm_epsilon,
        parallel_residual=parallel_residual,
        kernel_initializer=initializer,
        normalize_first=normalize_first,
        output_projection=output_projection,
        dtype=dtype,
        **kwargs,
    )


# `build_gpt_style` with a backbone constructor's own arguments:
# `build_gpt_style_from(self, locals(), activation=...)`.
build_gpt_style_from = builder_from(
    build_gpt_style,
    (
        *COMMON_ARGUMENTS,
        "max_sequence_length",
        "layer_norm_epsilon",
        "tie_word_embeddings",
        "normalize_first",
    ),
)


def gpt_block_rules():
    """Layout rules of the blocks of `build_gpt_style`'s own attention."""
    return [
        *attention_rules(BLOCK + "self_attention/", use_bias=True),
        *feedforward_rules(BLOCK, gated=False),
    ]
