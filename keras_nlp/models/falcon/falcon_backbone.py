"""Falcon decoder backbone (the ALiBi, multi-head variant of Falcon-RW)."""

import keras

from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.decoder_layer import DecoderLayer
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.decoder import init_decoder_graph
from keras_nlp.models.falcon.falcon_presets import FALCON_PRESETS

# Names of the shared layers' sublayers in Falcon checkpoints.
ATTENTION_NAMES = {
    "query": "query_dense",
    "key": "key_dense",
    "value": "value_dense",
    "output": "output_dense",
}
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
        block = r"transformer_layer_\d+/"
        return [
            *token_embedding_rules("token_embedding/", tied=True),
            *attention_rules(
                block + "attention/",
                sublayer_names=ATTENTION_NAMES,
                use_bias=True,
                flat_output_kernel=True,
            ),
            *feedforward_rules(block, sublayer_names=BLOCK_NAMES, gated=False),
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
        sizes = {
            "vocabulary_size": vocabulary_size,
            "num_layers": num_layers,
            "num_attention_heads": num_attention_heads,
            "hidden_dim": hidden_dim,
            "intermediate_dim": intermediate_dim,
        }
        for name, value in sizes.items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"`{name}` must be a positive integer. Received: "
                    f"{name}={value!r}."
                )
        if hidden_dim % num_attention_heads:
            raise ValueError(
                "`hidden_dim` must be divisible by `num_attention_heads`. "
                f"Received: hidden_dim={hidden_dim}, "
                f"num_attention_heads={num_attention_heads}."
            )
        # === Layers ===
        self.token_embedding = keras.layers.ReversibleEmbedding(
            input_dim=vocabulary_size,
            output_dim=hidden_dim,
            tie_weights=True,
            dtype=dtype,
            name="token_embedding",
        )
        self.transformer_layers = []
        for index in range(num_layers):
            attention = CachedGroupedQueryAttention(
                num_query_heads=num_attention_heads,
                num_key_value_heads=num_attention_heads,
                use_bias=True,
                use_output_bias=True,
                flat_output_kernel=True,
                use_alibi=True,
                zero_unattended_queries=True,
                scale_alibi=True,
                dropout=attention_dropout_rate,
                sublayer_names=ATTENTION_NAMES,
                dtype=dtype,
                name="attention",
            )
            self.transformer_layers.append(
                DecoderLayer(
                    attention=attention,
                    hidden_dim=hidden_dim,
                    intermediate_dim=intermediate_dim,
                    activation="gelu",
                    gated=False,
                    use_bias=True,
                    normalization="layer",
                    layer_norm_epsilon=layer_norm_epsilon,
                    dropout=attention_dropout_rate,
                    feedforward_dropout=feedforward_dropout_rate,
                    sublayer_names=BLOCK_NAMES,
                    dtype=dtype,
                    name=f"transformer_layer_{index}",
                )
            )
        self.final_layernorm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon,
            dtype=dtype,
            name="final_layernorm",
        )

        # === Functional graph ===
        init_decoder_graph(
            self,
            embed=self.token_embedding,
            blocks=self.transformer_layers,
            final_norm=self.final_layernorm,
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_attention_heads = num_attention_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.layer_norm_epsilon = layer_norm_epsilon
        self.attention_dropout_rate = attention_dropout_rate
        self.feedforward_dropout_rate = feedforward_dropout_rate

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_attention_heads": self.num_attention_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "attention_dropout_rate": self.attention_dropout_rate,
                "feedforward_dropout_rate": self.feedforward_dropout_rate,
            }
        )
        return config
