"""ALBERT encoder backbone."""

import keras

from keras_nlp.models.albert.albert_presets import ALBERT_PRESETS
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.construction import check_gelu
from keras_nlp.models.families.bert import bert_style_rules
from keras_nlp.models.families.bert import build_bert_style_from
from keras_nlp.models.families.bert import encoder_block
from keras_nlp.models.families.bert import encoder_block_rules

PROJECTION = "embedding_projection"
# The shared blocks' paths, `group_{g}_inner_layer_{i}/...`.
BLOCK = r"group_\d+_inner_layer_\d+/"


class AlbertBackbone(Backbone):
    """ALBERT encoder: BERT with narrow embeddings and shared blocks.

    Token, learned position and segment embeddings `embedding_dim` wide,
    summed, LayerNorm-ed and projected up to `hidden_dim` by
    `embedding_projection`. The blocks are BERT's (post-norm, GELU,
    biases everywhere), but only `num_groups * num_inner_repetitions` of
    them hold weights: block `i` of group `g` is `group_{g}_inner_layer_{i}`.
    Each group in turn runs its blocks in order `num_layers // num_groups`
    times. A tanh dense layer on the first (`[CLS]`) token gives the
    pooled output.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of group passes; a multiple of
            `num_groups`.
        num_heads: int. Attention heads; must divide `hidden_dim`.
        embedding_dim: int. Width of the embedding tables.
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of each feed-forward's hidden layer.
        num_groups: int. Groups of distinct blocks. Defaults to `1`.
        num_inner_repetitions: int. Distinct blocks per group. Defaults to
            `1`.
        dropout: float. Dropout rate in training: on the embeddings, the
            attention probabilities and both residual branches. Defaults to
            `0.0`.
        max_sequence_length: int. Rows of the position embedding, the
            longest input the model takes. Defaults to `512`.
        num_segments: int. Rows of the segment embedding. Defaults to `2`.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
        hidden_activation: string. Keyword-only. The feed-forward
            activation: `"gelu_approximate"` (tanh-approximated GELU, as
            keras-hub; Hugging Face's `hidden_act="gelu_new"`) or `"gelu"`
            (exact, erf-based GELU, Hugging Face's `hidden_act="gelu"`).
            Defaults to `"gelu_approximate"`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Returns (when called):
        `{"sequence_output": (batch, seq, hidden_dim), "pooled_output":
        (batch, hidden_dim)}`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models import AlbertBackbone

    model = AlbertBackbone(
        vocabulary_size=100,
        num_layers=4,
        num_heads=2,
        embedding_dim=16,
        hidden_dim=32,
        intermediate_dim=64,
        num_groups=2,
        max_sequence_length=16,
    )
    outputs = model(
        {
            "token_ids": np.array([[2, 7, 9, 3, 0]], "int32"),
            "segment_ids": np.array([[0, 0, 1, 1, 0]], "int32"),
            "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
        }
    )
    outputs["sequence_output"].shape  # (1, 5, 32)
    len(model.transformer_layers)  # 2: each group's block, called twice
    ```
    """

    presets = ALBERT_PRESETS

    @staticmethod
    def _layout_rules(config):
        # BERT's, at the shared blocks' paths. The 30000-token vocabulary
        # divides by 16, so the token table keeps its rows on the model
        # axis.
        return bert_style_rules(
            projection=PROJECTION, blocks=encoder_block_rules(block=BLOCK)
        )

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        embedding_dim,
        hidden_dim,
        intermediate_dim,
        num_groups=1,
        num_inner_repetitions=1,
        dropout=0.0,
        max_sequence_length=512,
        num_segments=2,
        dtype=None,
        *,
        hidden_activation="gelu_approximate",
        **kwargs,
    ):
        check_gelu(hidden_activation)
        if num_layers % num_groups:
            raise ValueError(
                "`num_layers` must be a multiple of `num_groups` (each group "
                "runs `num_layers // num_groups` times). Received: "
                f"num_layers={num_layers}, num_groups={num_groups}."
            )
        initializer = keras.initializers.TruncatedNormal(stddev=0.02)
        groups = [
            [
                encoder_block(
                    f"group_{group}_inner_layer_{inner}",
                    num_heads=num_heads,
                    hidden_dim=hidden_dim,
                    intermediate_dim=intermediate_dim,
                    activation=hidden_activation,
                    dropout=dropout,
                    layer_norm_epsilon=1e-12,
                    initializer=initializer,
                    dtype=dtype,
                )
                for inner in range(num_inner_repetitions)
            ]
            for group in range(num_groups)
        ]
        # Group by group, each group's blocks in order, repeated.
        blocks = [
            block
            for group in groups
            for _ in range(num_layers // num_groups)
            for block in group
        ]
        build_bert_style_from(
            self,
            locals(),
            projection_name=PROJECTION,
            activation=hidden_activation,
            initializer=initializer,
            blocks=blocks,
        )
