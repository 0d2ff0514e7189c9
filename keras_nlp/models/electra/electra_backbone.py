"""ELECTRA encoder backbone."""

from keras_nlp.models.backbone import Backbone
from keras_nlp.models.electra.electra_presets import ELECTRA_PRESETS
from keras_nlp.models.families.bert import bert_style_rules
from keras_nlp.models.families.bert import build_bert_style_from

PROJECTION = "embeddings_projection"


class ElectraBackbone(Backbone):
    """ELECTRA encoder: BERT whose embeddings may be narrower than its
    hidden states.

    Token, learned position and segment embeddings `embedding_dim` wide,
    summed and LayerNorm-ed; when `embedding_dim != hidden_dim`, a dense
    `embeddings_projection` maps them to `hidden_dim`. Then `num_layers`
    BERT blocks (post-norm, tanh-GELU, biases everywhere) and a tanh dense
    layer on the first (`[CLS]`) token for the pooled output.

    Args:
        vocab_size: int. Rows of the token embedding (keras-hub's name).
        num_layers: int. Number of encoder blocks.
        num_heads: int. Attention heads; must divide `hidden_dim`.
        hidden_dim: int. Width of the residual stream.
        embedding_dim: int. Width of the embedding tables.
        intermediate_dim: int. Width of each feed-forward's hidden layer.
        dropout: float. Dropout rate in training: on the embeddings, the
            attention probabilities and both residual branches. Defaults to
            `0.1`.
        max_sequence_length: int. Rows of the position embedding, the
            longest input the model takes. Defaults to `512`.
        num_segments: int. Rows of the segment embedding. Defaults to `2`.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Returns (when called):
        `{"sequence_output": (batch, seq, hidden_dim), "pooled_output":
        (batch, hidden_dim)}`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models import ElectraBackbone

    model = ElectraBackbone(
        vocab_size=100,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        embedding_dim=16,
        intermediate_dim=64,
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
    outputs["pooled_output"].shape  # (1, 32)
    ```
    """

    presets = ELECTRA_PRESETS

    @staticmethod
    def _layout_rules(config):
        # BERT's. The 30522-token vocabulary divides only by 2: on wider
        # model axes the table's embedding width takes the axis instead.
        projection = None
        if config["embedding_dim"] != config["hidden_dim"]:
            projection = PROJECTION
        return bert_style_rules(projection=projection)

    def __init__(
        self,
        vocab_size,
        num_layers,
        num_heads,
        hidden_dim,
        embedding_dim,
        intermediate_dim,
        dropout=0.1,
        max_sequence_length=512,
        num_segments=2,
        dtype=None,
        **kwargs,
    ):
        build_bert_style_from(
            self,
            locals(),
            vocabulary_size=vocab_size,
            # Only a narrower (or wider) embedding is projected.
            projection_name=(
                PROJECTION if embedding_dim != hidden_dim else None
            ),
            activation="gelu_approximate",
        )
