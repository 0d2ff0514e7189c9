"""Mistral decoder backbone."""

import keras

from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.decoder_layer import DecoderLayer
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.layers.rotary_embedding import RotaryEmbedding
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.decoder import init_decoder_graph
from keras_nlp.models.mistral.mistral_presets import MISTRAL_PRESETS


def _is_positive_integer(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def check_mistral_arguments(optional=(), **required):
    """Raises a `ValueError` naming the first malformed size argument.

    Every keyword argument must be a positive integer; those named in
    `optional` may also be `None`. `hidden_dim` must split into
    `num_query_heads` heads unless a `head_dim` is given.
    """
    for name, value in required.items():
        if value is None and name in optional:
            continue
        if not _is_positive_integer(value):
            allowed = " or None" if name in optional else ""
            raise ValueError(
                f"`{name}` must be a positive integer{allowed}. Received: "
                f"{name}={value!r}."
            )
    hidden_dim, heads = required["hidden_dim"], required["num_query_heads"]
    if required.get("head_dim") is None and hidden_dim % heads:
        raise ValueError(
            "`hidden_dim` must be a multiple of `num_query_heads` when "
            f"`head_dim` is None. Received: hidden_dim={hidden_dim}, "
            f"num_query_heads={heads}."
        )


def mistral_attention(
    num_query_heads,
    num_key_value_heads,
    head_dim,
    rope_max_wavelength,
    rope_scaling_factor,
    sliding_window,
    dropout,
    kernel_initializer,
    dtype,
):
    """Mistral's self-attention: GQA with RoPE and a sliding window."""
    rotary_embedding = RotaryEmbedding(
        max_wavelength=rope_max_wavelength,
        scaling_factor=rope_scaling_factor,
        dtype=dtype,
        name="rotary_embedding",
    )
    return CachedGroupedQueryAttention(
        num_query_heads=num_query_heads,
        num_key_value_heads=num_key_value_heads,
        head_dim=head_dim,
        rotary_embedding=rotary_embedding,
        sliding_window_size=sliding_window,
        dropout=dropout,
        kernel_initializer=kernel_initializer,
        dtype=dtype,
        name="self_attention",
    )


class MistralBackbone(Backbone):
    """Mistral decoder that maps token ids to final-normalized hidden states.

    Llama's architecture (pre-norm RMSNorm blocks, grouped-query attention
    with rotary position embedding, a SwiGLU feed-forward, an untied output
    embedding) with sliding-window attention on every layer: a token
    attends to itself and the `sliding_window - 1` tokens before it.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_query_heads: int. Query heads per attention layer.
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of the feed-forward.
        num_key_value_heads: int. Key/value heads; must divide
            `num_query_heads`.
        rope_max_wavelength: int or float. RoPE base. Defaults to `10000`.
        rope_scaling_factor: float. Positions are divided by it (linear
            interpolation). Defaults to `1.0`.
        layer_norm_epsilon: float. Epsilon of the RMS norms. Defaults to
            `1e-6`.
        sliding_window: int or `None`. Attention window in tokens; `None`
            attends to the whole causal prefix. Defaults to `512`.
        head_dim: int or `None`. Size of each head; `None` means
            `hidden_dim // num_query_heads`. Defaults to `None`.
        dropout: float. Dropout rate in training. Defaults to `0`.
        dtype: string or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.mistral import MistralBackbone

    model = MistralBackbone(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        sliding_window=3,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    ```
    """

    presets = MISTRAL_PRESETS

    @staticmethod
    def _layout_rules(config):
        block = r"transformer_layer_\d+/"
        return [
            *token_embedding_rules("token_embedding/", tied=False),
            *attention_rules(block + "self_attention/"),
            *feedforward_rules(block),
        ]

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_query_heads,
        hidden_dim,
        intermediate_dim,
        num_key_value_heads,
        rope_max_wavelength=10000,
        rope_scaling_factor=1.0,
        layer_norm_epsilon=1e-6,
        sliding_window=512,
        head_dim=None,
        dropout=0,
        dtype=None,
        **kwargs,
    ):
        check_mistral_arguments(
            optional=("sliding_window", "head_dim"),
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            num_query_heads=num_query_heads,
            hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            num_key_value_heads=num_key_value_heads,
            sliding_window=sliding_window,
            head_dim=head_dim,
        )
        # === Layers ===
        self.token_embedding = keras.layers.ReversibleEmbedding(
            input_dim=vocabulary_size,
            output_dim=hidden_dim,
            tie_weights=False,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=0.01),
            dtype=dtype,
            name="token_embedding",
        )
        kernel_initializer = keras.initializers.RandomNormal(stddev=0.02)
        self.transformer_layers = []
        for index in range(num_layers):
            attention = mistral_attention(
                num_query_heads,
                num_key_value_heads,
                head_dim,
                rope_max_wavelength,
                rope_scaling_factor,
                sliding_window,
                dropout,
                kernel_initializer,
                dtype,
            )
            self.transformer_layers.append(
                DecoderLayer(
                    attention=attention,
                    hidden_dim=hidden_dim,
                    intermediate_dim=intermediate_dim,
                    activation="silu",
                    layer_norm_epsilon=layer_norm_epsilon,
                    dropout=dropout,
                    kernel_initializer=kernel_initializer,
                    dtype=dtype,
                    name=f"transformer_layer_{index}",
                )
            )
        self.layer_norm = keras.layers.RMSNormalization(
            epsilon=layer_norm_epsilon,
            dtype=dtype,
            name="sequence_output_layernorm",
        )

        # === Functional graph ===
        init_decoder_graph(
            self,
            embed=self.token_embedding,
            blocks=self.transformer_layers,
            final_norm=self.layer_norm,
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_query_heads = num_query_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.num_key_value_heads = num_key_value_heads
        self.rope_max_wavelength = rope_max_wavelength
        self.rope_scaling_factor = rope_scaling_factor
        self.layer_norm_epsilon = layer_norm_epsilon
        self.sliding_window = sliding_window
        self.head_dim = head_dim
        self.dropout = dropout

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_query_heads": self.num_query_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "num_key_value_heads": self.num_key_value_heads,
                "rope_max_wavelength": self.rope_max_wavelength,
                "rope_scaling_factor": self.rope_scaling_factor,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "sliding_window": self.sliding_window,
                "head_dim": self.head_dim,
                "dropout": self.dropout,
            }
        )
        return config
