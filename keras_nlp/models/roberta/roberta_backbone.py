"""RoBERTa encoder backbone."""

from keras_nlp.models.backbone import Backbone
from keras_nlp.models.families.bert import bert_style_rules
from keras_nlp.models.families.bert import build_bert_style_from
from keras_nlp.models.roberta.roberta_presets import ROBERTA_PRESETS


class RobertaBackbone(Backbone):
    """RoBERTa encoder: token ids to contextual embeddings.

    BERT without segments or pooler: token and learned position embeddings
    (one `embeddings` layer holding both tables) summed and LayerNorm-ed,
    then `num_layers` post-norm blocks of bidirectional multi-head
    self-attention and an exact-GELU feed-forward, every projection with a
    bias and every LayerNorm with epsilon `1e-5`.

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
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
        keep_pooler: bool. Keyword-only. Also hold `pooled_dense`, a tanh
            dense layer for the first token (Hugging Face's `RobertaModel`
            pooler), whose weights load and save with the others but which
            the outputs do not use (call `backbone.pooled_dense` on the
            first token's output to pool). A Hugging Face checkpoint with a
            pooler loads with `keep_pooler=True`, so that its export writes
            the pooler back. Defaults to `False`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Returns (when called):
        The sequence output, `(batch, seq, hidden_dim)`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models import RobertaBackbone

    model = RobertaBackbone(
        vocabulary_size=101,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=16,
    )
    outputs = model(
        {
            "token_ids": np.array([[0, 7, 9, 2, 1]], "int32"),
            "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
        }
    )
    outputs.shape  # (1, 5, 32)
    ```
    """

    presets = ROBERTA_PRESETS

    @staticmethod
    def _layout_rules(config):
        # The odd 50265 vocabulary divides no axis: the table's hidden
        # dimension takes the model axis (and the data axis) instead.
        return bert_style_rules(
            token="embeddings/token_embedding/",
            position="embeddings/position_embedding/",
            segment=None,
            pooled=bool(config.get("keep_pooler")),
        )

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        max_sequence_length=512,
        dtype=None,
        *,
        keep_pooler=False,
        **kwargs,
    ):
        build_bert_style_from(
            self,
            locals(),
            activation="gelu",
            layer_norm_epsilon=1e-5,
            embeddings_layer="embeddings",
            pooled=bool(keep_pooler),
            pooled_output=False,
        )
