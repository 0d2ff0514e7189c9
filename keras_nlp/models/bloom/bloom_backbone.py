"""BLOOM decoder backbone."""

import keras

from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.bloom.bloom_presets import BLOOM_PRESETS
from keras_nlp.models.families.bloom import bloom_block_rules
from keras_nlp.models.families.bloom import build_bloom_style_from

# The names of a block's layers in BLOOM checkpoints.
ATTENTION = "self_attention"
BLOCK_NAMES = {
    "attention_norm": "pre_attention_layernorm",
    "feedforward_norm": "post_attention_layernorm",
    "intermediate": "mlp_intermediate_dense",
    "output": "mlp_output_dense",
}


class BloomBackbone(Backbone):
    """BLOOM decoder that maps token ids to final-normalized hidden states.

    The token embedding is layer-normalized, then each pre-norm block runs
    multi-head self-attention with ALiBi position biases (no position
    embedding) and a tanh-GELU feed-forward, both with biases. The output
    projection reuses the token embedding.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_heads: int. Attention heads per block; `head_dim` is
            `hidden_dim // num_heads`.
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of the feed-forward.
        dropout: float. Dropout rate in training, on the attention
            probabilities and on both branches' outputs. Defaults to `0`.
        layer_norm_epsilon: float. Epsilon of the layer norms. Defaults to
            `1e-5`.
        dtype: string or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.bloom import BloomBackbone

    model = BloomBackbone(
        vocabulary_size=64,
        num_layers=2,
        num_heads=4,
        hidden_dim=32,
        intermediate_dim=128,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    ```
    """

    presets = BLOOM_PRESETS
    # `enable_lora` adapts the query and value projections by default.
    lora_target_names = ("query_dense", "value_dense")

    @staticmethod
    def _layout_rules(config):
        return [
            *token_embedding_rules("token_embedding/", tied=True),
            *bloom_block_rules(ATTENTION, BLOCK_NAMES),
        ]

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.0,
        layer_norm_epsilon=1e-5,
        dtype=None,
        **kwargs,
    ):
        build_bloom_style_from(
            self,
            locals(),
            activation="gelu_approximate",
            embeddings_initializer=keras.initializers.RandomNormal(stddev=0.02),
            embeddings_layer_norm=True,
            attention_name=ATTENTION,
            block_names=BLOCK_NAMES,
        )
