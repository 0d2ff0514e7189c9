"""BERT encoder backbone."""

from keras_nlp.models.backbone import Backbone
from keras_nlp.models.bert.bert_presets import BERT_PRESETS
from keras_nlp.models.construction import check_gelu
from keras_nlp.models.families.bert import bert_style_rules
from keras_nlp.models.families.bert import build_bert_style_from


class BertBackbone(Backbone):
    """BERT encoder: token ids and segment ids to contextual embeddings.

    Token, learned position and segment embeddings summed and
    LayerNorm-ed, then `num_layers` post-norm blocks of bidirectional
    multi-head self-attention and a GELU feed-forward (keras-hub's
    tanh approximation by default; Hugging Face's BERTs use the exact
    one, `hidden_activation="gelu"`), every projection with a bias. A
    tanh dense layer on the first (`[CLS]`) token gives the pooled output.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of encoder blocks.
        num_heads: int. Attention heads; must divide `hidden_dim`.
        hidden_dim: int. Width of the embeddings and the residual stream.
        intermediate_dim: int. Width of each feed-forward's hidden layer.
        dropout: float. Dropout rate in training: on the embeddings, the
            attention probabilities and both residual branches. Defaults to
            `0.1`.
        max_sequence_length: int. Rows of the position embedding, the
            longest input the model takes. Defaults to `512`.
        num_segments: int. Rows of the segment embedding. Defaults to `2`.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
        hidden_activation: string. Keyword-only. The feed-forward
            activation: `"gelu_approximate"` (tanh-approximated GELU, as
            keras-hub and Google's original BERT) or `"gelu"` (exact,
            erf-based GELU, Hugging Face's `hidden_act="gelu"`). Defaults
            to `"gelu_approximate"`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Returns (when called):
        `{"sequence_output": (batch, seq, hidden_dim), "pooled_output":
        (batch, hidden_dim)}`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models import BertBackbone

    model = BertBackbone(
        vocabulary_size=100,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
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

    presets = BERT_PRESETS

    @staticmethod
    def _layout_rules(config):
        # The uncased vocabulary (30522) divides only by 2: on wider model
        # axes the table's hidden dimension takes the axis instead.
        return bert_style_rules()

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        max_sequence_length=512,
        num_segments=2,
        dtype=None,
        *,
        hidden_activation="gelu_approximate",
        **kwargs,
    ):
        check_gelu(hidden_activation)
        build_bert_style_from(self, locals(), activation=hidden_activation)
