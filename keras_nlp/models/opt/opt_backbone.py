"""OPT decoder backbone."""

import keras

from keras_nlp.layers.layout_rules import position_embedding_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.families.gpt import build_gpt_style
from keras_nlp.models.families.gpt import gpt_block_rules
from keras_nlp.models.opt.opt_presets import OPT_PRESETS


class OPTBackbone(Backbone):
    """OPT decoder that maps token ids to final-normalized hidden states.

    GPT-2's architecture with a ReLU MLP: token embeddings plus learned
    absolute position embeddings (under one `embeddings` layer), then
    `num_layers` pre-LayerNorm blocks of multi-head causal self-attention
    and a ReLU MLP, all projections with biases, and a final LayerNorm.
    Positions count from 0 at the first token of every row, padding
    included: keras-hub checkpoints store the position table without the
    two-row offset of the original fairseq/Hugging Face weights. The token
    embedding is tied: `token_embedding(x, reverse=True)` gives the
    vocabulary logits.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_heads: int. Attention heads; must divide `hidden_dim`.
        hidden_dim: int. Width of the residual stream and embeddings.
        intermediate_dim: int. Width of each MLP's hidden layer.
        dropout: float. Dropout rate in training: on the attention
            probabilities and both residual branches. Defaults to `0.1`,
            as OPT was trained.
        max_sequence_length: int. Rows of the position embedding, the
            longest input the model takes. Defaults to `2048`.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.opt.opt_backbone import OPTBackbone

    model = OPTBackbone(
        vocabulary_size=101,
        num_layers=2,
        num_heads=4,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=16,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    logits = model.token_embedding(hidden_states, reverse=True)  # (2, 4, 101)
    ```
    """

    presets = OPT_PRESETS

    @staticmethod
    def _layout_rules(config):
        tables = "embeddings/"
        return [
            *token_embedding_rules(tables + "token_embedding/", tied=True),
            *position_embedding_rules(tables + "position_embedding/"),
            *gpt_block_rules(),
        ]

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        max_sequence_length=2048,
        dtype=None,
        **kwargs,
    ):
        build_gpt_style(
            self,
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            num_heads=num_heads,
            hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            max_sequence_length=max_sequence_length,
            activation="relu",
            dropout=dropout,
            initializer=keras.initializers.TruncatedNormal(stddev=0.02),
            # Both tables in one layer, and no dropout on their sum.
            embeddings_layer="embeddings",
            embeddings_dropout=False,
            dtype=dtype,
            **kwargs,
        )
