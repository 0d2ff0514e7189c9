"""Mistral decoder backbone."""

from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.families.llama import build_llama_style
from keras_nlp.models.families.llama import plain_rotary_embedding
from keras_nlp.models.mistral.mistral_presets import MISTRAL_PRESETS


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
        sliding_window: int | None = 512,
        head_dim=None,
        dropout=0,
        dtype=None,
        **kwargs,
    ):
        build_llama_style(
            self,
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            num_query_heads=num_query_heads,
            num_key_value_heads=num_key_value_heads,
            head_dim=head_dim,
            rotary_embedding=plain_rotary_embedding(
                rope_max_wavelength, rope_scaling_factor, dtype
            ),
            attention_options={"sliding_window_size": sliding_window},
            layer_norm_epsilon=layer_norm_epsilon,
            dropout=dropout,
            tie_word_embeddings=False,
            dtype=dtype,
            **kwargs,
        )
