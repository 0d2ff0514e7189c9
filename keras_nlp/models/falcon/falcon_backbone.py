"""Falcon decoder backbone (the ALiBi, multi-head variant of Falcon-RW)."""

from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.falcon.falcon_presets import FALCON_PRESETS
from keras_nlp.models.families.bloom import bloom_block_rules
from keras_nlp.models.families.bloom import build_bloom_style

# The names of a block's layers in Falcon checkpoints.
ATTENTION = "attention"
BLOCK_NAMES = {
    "attention_norm": "input_layernorm",
    "feedforward_norm": "post_attention_layernorm",
    "intermediate": "dense_h_to_4h",
    "output": "dense_4h_to_h",
}


class FalconBackbone(Backbone):
    """Falcon decoder that maps token ids to final-normalized hidden states.

    Pre-norm blocks with sequential residuals: multi-head self-attention
    with ALiBi position biases (added before the `1 / sqrt(head_dim)`
    scaling, so the slopes are scaled too) and an exact-GELU feed-forward,
    all projections with biases. No position embedding; the output
    projection reuses the token embedding. This is the architecture of
    Falcon-RW (`falcon_refinedweb_1b_en`); the rotary, multi-query Falcon
    7B/40B variants are not covered.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_attention_heads: int. Attention heads per block; `head_dim` is
            `hidden_dim // num_attention_heads`.
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of the feed-forward.
        layer_norm_epsilon: float. Epsilon of the layer norms. Defaults to
            `1e-5`.
        attention_dropout_rate: float. Dropout in training on the attention
            probabilities and the attention branch's output. Defaults to `0`.
        feedforward_dropout_rate: float. Dropout in training on the
            feed-forward branch's output. Defaults to `0`.
        dtype: string or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.falcon import FalconBackbone

    model = FalconBackbone(
        vocabulary_size=64,
        num_layers=2,
        num_attention_heads=4,
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

    presets = FALCON_PRESETS
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
        num_attention_heads,
        hidden_dim,
        intermediate_dim,
        layer_norm_epsilon=1e-5,
        attention_dropout_rate=0,
        feedforward_dropout_rate=0,
        dtype=None,
        **kwargs,
    ):
        build_bloom_style(
            self,
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            num_heads=num_attention_heads,
            heads_argument="num_attention_heads",
            hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            activation="gelu",
            layer_norm_epsilon=layer_norm_epsilon,
            dropout=attention_dropout_rate,
            feedforward_dropout=feedforward_dropout_rate,
            # ALiBi is added before the logits are scaled.
            scale_alibi=True,
            embeddings_initializer="uniform",
            attention_name=ATTENTION,
            block_names=BLOCK_NAMES,
            dtype=dtype,
            **kwargs,
        )
