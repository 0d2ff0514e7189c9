"""BLOOM decoder backbone."""

import keras

from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.decoder_layer import DecoderLayer
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.bloom.bloom_presets import BLOOM_PRESETS
from keras_nlp.models.decoder import init_decoder_graph

# Names of the shared layers' sublayers in BLOOM checkpoints.
ATTENTION_NAMES = {
    "query": "query_dense",
    "key": "key_dense",
    "value": "value_dense",
    "output": "output_dense",
}
BLOCK_NAMES = {
    "attention_norm": "pre_attention_layernorm",
    "feedforward_norm": "post_attention_layernorm",
    "intermediate": "mlp_intermediate_dense",
    "output": "mlp_output_dense",
}


def check_arguments(hidden_dim, num_heads, heads_name="num_heads", **sizes):
    """Raises unless every size is a positive int and the heads divide."""
    for name, value in {**sizes, "hidden_dim": hidden_dim}.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(
                f"`{name}` must be a positive integer. Received: "
                f"{name}={value!r}."
            )
    if not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(
            f"`{heads_name}` must be a positive integer. Received: "
            f"{heads_name}={num_heads!r}."
        )
    if hidden_dim % num_heads:
        raise ValueError(
            f"`hidden_dim` must be divisible by `{heads_name}`. Received: "
            f"hidden_dim={hidden_dim}, {heads_name}={num_heads}."
        )


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
        block = r"transformer_layer_\d+/"
        return [
            *token_embedding_rules("token_embedding/", tied=True),
            *attention_rules(
                block + "self_attention/",
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
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.0,
        layer_norm_epsilon=1e-5,
        dtype=None,
        **kwargs,
    ):
        check_arguments(
            hidden_dim,
            num_heads,
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            intermediate_dim=intermediate_dim,
        )
        # === Layers ===
        self.token_embedding = keras.layers.ReversibleEmbedding(
            input_dim=vocabulary_size,
            output_dim=hidden_dim,
            tie_weights=True,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=0.02),
            dtype=dtype,
            name="token_embedding",
        )
        self.embeddings_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon,
            dtype=dtype,
            name="embedding_layernorm",
        )
        self.transformer_layers = []
        for index in range(num_layers):
            attention = CachedGroupedQueryAttention(
                num_query_heads=num_heads,
                num_key_value_heads=num_heads,
                use_bias=True,
                use_output_bias=True,
                flat_output_kernel=True,
                use_alibi=True,
                zero_unattended_queries=True,
                dropout=dropout,
                sublayer_names=ATTENTION_NAMES,
                dtype=dtype,
                name="self_attention",
            )
            self.transformer_layers.append(
                DecoderLayer(
                    attention=attention,
                    hidden_dim=hidden_dim,
                    intermediate_dim=intermediate_dim,
                    activation="gelu_approximate",
                    gated=False,
                    use_bias=True,
                    normalization="layer",
                    layer_norm_epsilon=layer_norm_epsilon,
                    dropout=dropout,
                    sublayer_names=BLOCK_NAMES,
                    dtype=dtype,
                    name=f"transformer_layer_{index}",
                )
            )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon,
            dtype=dtype,
            name="final_layernorm",
        )

        # === Functional graph ===
        init_decoder_graph(
            self,
            embed=lambda ids: self.embeddings_layer_norm(
                self.token_embedding(ids)
            ),
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
        self.layer_norm_epsilon = layer_norm_epsilon

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
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
