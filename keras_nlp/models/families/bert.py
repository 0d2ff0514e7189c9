"""The BERT-style encoder stack: BERT, RoBERTa, XLM-R, DistilBERT, ALBERT,
ELECTRA and F-Net.

Token embeddings plus learned positions (plus segment embeddings), a
LayerNorm and dropout, optionally a dense projection from the embedding
width up to the hidden width, then post-norm `TransformerEncoderBlock`s,
and optionally a tanh pooler on the first (`[CLS]`) token. The members
differ only in the arguments of `build_bert_style`: where the tables live,
segments or not, the projection, the pooler, the activation and epsilon,
and (ALBERT, F-Net) the blocks themselves.
"""

import keras

from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import MODEL
from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.dense import fresh_initializer
from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.layers.layout_rules import position_embedding_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.layers.token_and_position_embedding import SEGMENT_EMBEDDING_DIMS
from keras_nlp.layers.token_and_position_embedding import PositionEmbedding
from keras_nlp.layers.token_and_position_embedding import (
    TokenAndPositionEmbedding,
)
from keras_nlp.layers.token_and_position_embedding import segment_embedding
from keras_nlp.layers.token_and_position_embedding import token_embedding
from keras_nlp.layers.transformer_encoder import TransformerEncoderBlock
from keras_nlp.models.construction import COMMON_ARGUMENTS
from keras_nlp.models.construction import builder_from
from keras_nlp.models.construction import check_dropout_rate
from keras_nlp.models.construction import check_heads_divide
from keras_nlp.models.encoder import init_encoder_graph

# The paths of the blocks, `transformer_layer_{i}/...`.
BLOCK = r"transformer_layer_\d+/"
ATTENTION = "self_attention_layer"
# The pooler `(hidden, hidden)` and the embedding projection
# `(embedding_dim, hidden)`: distinct names, so a rule orders them.
POOLED_DIMS = ("hidden", "pooled")
PROJECTION_DIMS = ("embedding", "hidden")


def encoder_block(
    name,
    *,
    num_heads,
    hidden_dim,
    intermediate_dim,
    activation,
    dropout,
    layer_norm_epsilon,
    initializer,
    dtype=None,
    mixing=None,
    use_key_bias=None,
    **kwargs,
):
    """A `TransformerEncoderBlock` named `name`, with multi-head attention.

    Args:
        name: the block's name, e.g. `"transformer_layer_0"`.
        num_heads: int. Query (and key/value) heads.
        hidden_dim, intermediate_dim, activation, dropout,
            layer_norm_epsilon: as in `TransformerEncoderBlock`.
        initializer: initializer of every kernel.
        dtype: dtype or `keras.DTypePolicy`.
        mixing: optional token-mixing layer used instead of attention.
        use_key_bias: bool or `None`. Bias on the attention's key
            projection; `None` follows the other projections (Whisper's
            keys have none).
        **kwargs: forwarded to `TransformerEncoderBlock`
            (`sublayer_names`, `bias_initializer`).
    """
    if mixing is None:
        mixing = CachedGroupedQueryAttention(
            num_query_heads=num_heads,
            num_key_value_heads=num_heads,
            use_bias=True,
            use_output_bias=True,
            use_key_bias=use_key_bias,
            dropout=dropout,
            kernel_initializer=fresh_initializer(initializer),
            dtype=dtype,
            name=ATTENTION,
        )
    return TransformerEncoderBlock(
        mixing=mixing,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        activation=activation,
        layer_norm_epsilon=layer_norm_epsilon,
        dropout=dropout,
        kernel_initializer=fresh_initializer(initializer),
        dtype=dtype,
        name=name,
        **kwargs,
    )


def bert_embeddings(
    backbone,
    *,
    vocabulary_size,
    hidden_dim,
    max_sequence_length,
    dropout,
    initializer,
    layer_norm_epsilon,
    dtype,
    bias_initializer="zeros",
    num_segments=None,
    embedding_dim=None,
    projection_name=None,
    project_before_dropout=False,
    embeddings_layer=None,
):
    """Adds the BERT-style embedding layers to `backbone`.

    Sets `token_embedding` and `position_embedding` (or `embeddings`,
    holding both; no position table without `max_sequence_length`, as in
    DeBERTa), `segment_embedding` when there are segments,
    `embeddings_layer_norm`, `embeddings_dropout` and
    `embeddings_projection` (`None` without a projection), with the
    checkpoints' names.

    Args:
        backbone: the backbone being constructed.
        vocabulary_size, hidden_dim, dropout, initializer,
            layer_norm_epsilon, dtype, bias_initializer: as in
            `build_bert_style`.
        max_sequence_length: int, the position table's rows, or `None` for
            no position table.
        num_segments: int, or `None` for no segment embedding (and no
            `segment_ids` input).
        embedding_dim: width of the embedding tables; `None` means
            `hidden_dim`.
        projection_name: name of a dense projection of the embeddings to
            `hidden_dim` (ALBERT `embedding_projection`, ELECTRA
            `embeddings_projection`, F-Net), or `None` for none.
        project_before_dropout: bool. The projection comes before the
            embedding dropout (F-Net) instead of after it.
        embeddings_layer: name of one `TokenAndPositionEmbedding` holding
            both tables (RoBERTa `embeddings`, DistilBERT
            `token_and_position_embedding`), or `None` for the top-level
            layers `token_embedding` and `position_embedding`.

    Returns:
        `embed(token_ids, segment_ids)`, the encoder's first hidden states.
    """
    embedding_dim = embedding_dim or hidden_dim
    if embeddings_layer:
        backbone.embeddings = TokenAndPositionEmbedding(
            vocabulary_size=vocabulary_size,
            sequence_length=max_sequence_length,
            embedding_dim=embedding_dim,
            embeddings_initializer=fresh_initializer(initializer),
            dtype=dtype,
            name=embeddings_layer,
        )
        backbone.token_embedding = backbone.embeddings.token_embedding
        backbone.position_embedding = backbone.embeddings.position_embedding
    else:
        backbone.token_embedding = token_embedding(
            vocabulary_size,
            embedding_dim,
            initializer=fresh_initializer(initializer),
            dtype=dtype,
        )
        if max_sequence_length is not None:
            backbone.position_embedding = PositionEmbedding(
                sequence_length=max_sequence_length,
                initializer=fresh_initializer(initializer),
                dtype=dtype,
                name="position_embedding",
            )
    if num_segments is not None:
        backbone.segment_embedding = segment_embedding(
            num_segments,
            embedding_dim,
            initializer=fresh_initializer(initializer),
            dtype=dtype,
        )
    backbone.embeddings_layer_norm = keras.layers.LayerNormalization(
        epsilon=layer_norm_epsilon, dtype=dtype, name="embeddings_layer_norm"
    )
    backbone.embeddings_dropout = keras.layers.Dropout(
        dropout, dtype=dtype, name="embeddings_dropout"
    )
    backbone.embeddings_projection = None
    if projection_name:
        backbone.embeddings_projection = named_dense(
            hidden_dim,
            PROJECTION_DIMS,
            kernel_initializer=initializer,
            bias_initializer=bias_initializer,
            dtype=dtype,
            name=projection_name,
        )

    def embed(token_ids, segment_ids):
        if embeddings_layer:
            x = backbone.embeddings(token_ids)
        else:
            x = backbone.token_embedding(token_ids)
            if max_sequence_length is not None:
                x = x + backbone.position_embedding(x)
        if num_segments is not None:
            x = x + backbone.segment_embedding(segment_ids)
        x = backbone.embeddings_layer_norm(x)
        project = backbone.embeddings_projection or (lambda y: y)
        if project_before_dropout:
            return backbone.embeddings_dropout(project(x))
        return project(backbone.embeddings_dropout(x))

    return embed


def build_bert_style(
    backbone,
    *,
    vocabulary_size,
    num_layers,
    num_heads,
    hidden_dim,
    intermediate_dim,
    dropout,
    max_sequence_length,
    activation,
    initializer=None,
    bias_initializer="zeros",
    layer_norm_epsilon=1e-12,
    num_segments=None,
    embedding_dim=None,
    projection_name=None,
    project_before_dropout=False,
    embeddings_layer=None,
    pooled=True,
    pooled_output=True,
    blocks=None,
    padding_mask=True,
    dtype=None,
    **kwargs,
):
    """Builds a BERT-style encoder into `backbone`; initializes its graph.

    Sets the embedding layers (see `bert_embeddings`), `transformer_layers`
    and `pooled_dense` (`None` unless pooled), with the checkpoints' names.

    Args:
        backbone: the backbone being constructed.
        vocabulary_size, num_layers, num_heads, hidden_dim,
            intermediate_dim, dropout, max_sequence_length: as in
            `BertBackbone`.
        activation: str, the feed-forward activation.
        initializer: initializer of every table and kernel (copied for
            each); defaults to `TruncatedNormal(stddev=0.02)`, as most
            members were trained.
        bias_initializer: initializer of the projection's and pooler's
            biases (F-Net: random, like its kernels).
        layer_norm_epsilon: float. Epsilon of every LayerNorm.
        num_segments, embedding_dim, projection_name,
            project_before_dropout, embeddings_layer: the embeddings' shape,
            as in `bert_embeddings`.
        pooled: bool. Add `pooled_dense` and output
            `{"sequence_output", "pooled_output"}`.
        pooled_output: bool. With `pooled`, whether the outputs use the
            pooler; `False` keeps `pooled_dense` (built, its weights
            loaded and saved) outside the graph, the sequence output
            alone being the output (RoBERTa's `keep_pooler`).
        blocks: the blocks in call order, or `None` for `num_layers`
            attention blocks `transformer_layer_{i}`. The attribute
            `transformer_layers` lists each distinct block once.
        padding_mask: bool. Take a `padding_mask` input.
        dtype: dtype or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (`name`, ...).
    """
    if num_heads is not None:
        check_heads_divide(hidden_dim, num_heads)
    check_dropout_rate(dropout)
    if initializer is None:
        initializer = keras.initializers.TruncatedNormal(stddev=0.02)
    embed = bert_embeddings(
        backbone,
        vocabulary_size=vocabulary_size,
        hidden_dim=hidden_dim,
        max_sequence_length=max_sequence_length,
        dropout=dropout,
        initializer=initializer,
        bias_initializer=bias_initializer,
        layer_norm_epsilon=layer_norm_epsilon,
        num_segments=num_segments,
        embedding_dim=embedding_dim,
        projection_name=projection_name,
        project_before_dropout=project_before_dropout,
        embeddings_layer=embeddings_layer,
        dtype=dtype,
    )
    if blocks is None:
        blocks = [
            encoder_block(
                f"transformer_layer_{index}",
                num_heads=num_heads,
                hidden_dim=hidden_dim,
                intermediate_dim=intermediate_dim,
                activation=activation,
                dropout=dropout,
                layer_norm_epsilon=layer_norm_epsilon,
                initializer=initializer,
                dtype=dtype,
            )
            for index in range(num_layers)
        ]
    backbone.transformer_layers = list(dict.fromkeys(blocks))
    backbone.pooled_dense = None
    if pooled:
        backbone.pooled_dense = named_dense(
            hidden_dim,
            POOLED_DIMS,
            activation="tanh",
            kernel_initializer=initializer,
            bias_initializer=bias_initializer,
            dtype=dtype,
            name="pooled_dense",
        )
        if not pooled_output:
            # Outside the graph: built here, tracked as an attribute.
            backbone.pooled_dense.build((None, hidden_dim))
    init_encoder_graph(
        backbone,
        embed,
        blocks,
        pooler=backbone.pooled_dense if pooled_output else None,
        segment_ids=num_segments is not None,
        padding_mask=padding_mask,
        dtype=dtype,
        **kwargs,
    )


# `build_bert_style` with a backbone constructor's own arguments:
# `build_bert_style_from(self, locals(), activation=...)`.
build_bert_style_from = builder_from(
    build_bert_style,
    (*COMMON_ARGUMENTS, "max_sequence_length", "num_segments", "embedding_dim"),
)


def encoder_block_rules(block=BLOCK, attention=ATTENTION + "/"):
    """Layout rules of `encoder_block`s under the regex `block`.

    Heads on the model axis; where the axis does not divide the heads, the
    kernels' hidden dimension instead (a head is never split). The
    feed-forward width on the model axis.
    """
    return [
        *attention_rules(
            block + attention, use_bias=True, hidden_if_heads_indivisible=True
        ),
        *feedforward_rules(block, gated=False),
    ]


def bert_style_rules(
    token="token_embedding/",
    position="position_embedding/",
    segment="segment_embedding/",
    projection=None,
    pooled=True,
    blocks=(),
):
    """Layout rules of a `build_bert_style` stack.

    The token table by vocabulary (else hidden). The position table is
    sharded like the decoders' (rows on the model axis, hidden on the data
    axis): replicated, it alone would cost BERT-tiny 11% over the ideal on
    8 devices. The segment table (2 or 4 rows) is declared replicated. The
    projection and pooler put their output width on the model axis.

    Args:
        token, position: path prefixes of the token and position tables.
        segment: path prefix of the segment table, or `None`.
        projection: name of the embedding projection, or `None`.
        pooled: bool. Whether there is a `pooled_dense`.
        blocks: the blocks' rules; defaults to `encoder_block_rules()`.
    """
    rules = [
        *token_embedding_rules(token, tied=True),
        *position_embedding_rules(position),
    ]
    if segment:
        rules.append(
            named_rule(segment + "embeddings", SEGMENT_EMBEDDING_DIMS, {})
        )
    if projection:
        rules.append(
            named_rule(
                projection + "/kernel",
                PROJECTION_DIMS,
                {"hidden": MODEL, "embedding": DATA},
            )
        )
    if pooled:
        rules.append(
            named_rule(
                "pooled_dense/kernel",
                POOLED_DIMS,
                {"pooled": MODEL, "hidden": DATA},
            )
        )
    return rules + list(blocks or encoder_block_rules())
