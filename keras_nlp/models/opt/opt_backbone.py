"""OPT decoder backbone."""

import keras

from keras_nlp.layers.token_and_position_embedding import (
    TokenAndPositionEmbedding,
)
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.decoder import init_decoder_graph
from keras_nlp.models.gpt2.gpt2_backbone import LAYER_NORM_EPSILON
from keras_nlp.models.gpt2.gpt2_backbone import check_decoder_arguments
from keras_nlp.models.gpt2.gpt2_backbone import learned_position_decoder_layers
from keras_nlp.models.gpt2.gpt2_backbone import learned_position_decoder_rules
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
        return learned_position_decoder_rules("embeddings/")

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
        check_decoder_arguments(
            vocabulary_size,
            num_layers,
            num_heads,
            hidden_dim,
            intermediate_dim,
            dropout,
            max_sequence_length,
        )

        # === Layers ===
        self.embeddings = TokenAndPositionEmbedding(
            vocabulary_size=vocabulary_size,
            sequence_length=max_sequence_length,
            embedding_dim=hidden_dim,
            tie_weights=True,
            embeddings_initializer=keras.initializers.TruncatedNormal(
                stddev=0.02
            ),
            dtype=dtype,
            name="embeddings",
        )
        self.token_embedding = self.embeddings.token_embedding
        self.transformer_layers = learned_position_decoder_layers(
            num_layers=num_layers,
            num_heads=num_heads,
            hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            activation="relu",
            dropout=dropout,
            kernel_initializer=lambda: keras.initializers.TruncatedNormal(
                stddev=0.02
            ),
            dtype=dtype,
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype=dtype, name="layer_norm"
        )

        # === Functional graph ===
        # Unlike GPT-2, OPT has no dropout on the embeddings.
        init_decoder_graph(
            self,
            embed=self.embeddings,
            blocks=self.transformer_layers,
            final_norm=self.layer_norm,
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.max_sequence_length = max_sequence_length

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "max_sequence_length": self.max_sequence_length,
            }
        )
        return config
