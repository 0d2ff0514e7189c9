"""GPT-2 decoder backbone."""

import keras

from keras_nlp.layers.layout_rules import position_embedding_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.families.gpt import build_gpt_style_from
from keras_nlp.models.families.gpt import gpt_block_rules
from keras_nlp.models.gpt2.gpt2_presets import GPT2_PRESETS


class GPT2Backbone(Backbone):
    """GPT-2 decoder that maps token ids to final-normalized hidden states.

    Token embeddings plus learned absolute position embeddings (the first
    token of every row at position 0, padding included), then `num_layers`
    pre-LayerNorm blocks of multi-head causal self-attention and a
    tanh-GELU MLP, all projections with biases, and a final LayerNorm. The
    token embedding is tied: `token_embedding(x, reverse=True)` gives the
    vocabulary logits.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_heads: int. Attention heads; must divide `hidden_dim`.
        hidden_dim: int. Width of the residual stream and embeddings.
        intermediate_dim: int. Width of each MLP's hidden layer.
        dropout: float. Dropout rate in training: on the summed embeddings,
            the attention probabilities and both residual branches.
            Defaults to `0.1`, as GPT-2 was trained.
        max_sequence_length: int. Rows of the position embedding, the
            longest input the model takes. Defaults to `1024`.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.gpt2.gpt2_backbone import GPT2Backbone

    model = GPT2Backbone(
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

    presets = GPT2_PRESETS

    @staticmethod
    def _layout_rules(config):
        # GPT-2's vocabulary (50257) divides no axis: its hidden dimension
        # then goes on the model axis, or on both axes of a 2-D mesh.
        return [
            *token_embedding_rules("token_embedding/", tied=True),
            *position_embedding_rules("position_embedding/"),
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
        max_sequence_length=1024,
        dtype=None,
        **kwargs,
    ):
        build_gpt_style_from(
            self,
            locals(),
            activation="gelu_approximate",
            initializer=keras.initializers.RandomNormal(stddev=0.02),
        )
