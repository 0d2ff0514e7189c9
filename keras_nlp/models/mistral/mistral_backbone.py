"""Mistral decoder backbone."""

from keras_nlp.models.backbone import Backbone
from keras_nlp.models.families.llama import build_llama_style_from
from keras_nlp.models.families.llama import llama_style_rules
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
        return llama_style_rules(tied=False)

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
        build_llama_style_from(
            self,
            locals(),
            attention_options={"sliding_window_size": sliding_window},
        )
