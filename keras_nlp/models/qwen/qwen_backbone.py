"""Qwen 2 / Qwen 2.5 decoder backbone."""

from keras_nlp.models.backbone import Backbone
from keras_nlp.models.families.llama import build_llama_style_from
from keras_nlp.models.families.llama import llama_style_rules
from keras_nlp.models.qwen.qwen_presets import QWEN_PRESETS


def qwen_attention_options(use_sliding_window_attention, sliding_window_size):
    """Qwen 2's (and Qwen MoE's) `build_llama_style` attention options.

    Biases on the query, key and value projections; with
    `use_sliding_window_attention`, keras-hub windows every layer (there
    is no `max_window_layers`).
    """
    return {
        "use_bias": True,
        "sliding_window_size": (
            sliding_window_size if use_sliding_window_attention else None
        ),
    }


class QwenBackbone(Backbone):
    """Qwen 2 / 2.5 decoder mapping token ids to final-normalized states.

    The Llama architecture (pre-norm RMSNorm blocks, grouped-query attention
    with RoPE, SwiGLU feed-forward) with biases on the query, key and value
    projections (none on the attention output) and, by default, an output
    projection tied to the token embedding.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_query_heads: int. Query heads per attention layer.
        num_key_value_heads: int. Key/value heads; must divide
            `num_query_heads`.
        hidden_dim: int. Width of the residual stream; `head_dim` is
            `hidden_dim // num_query_heads`.
        intermediate_dim: int. Width of the feed-forward.
        rope_max_wavelength: int. RoPE base. Defaults to `10000`.
        rope_scaling_factor: float. Positions are divided by it (linear
            interpolation). Defaults to `1.0`.
        layer_norm_epsilon: float. Epsilon of the RMS norms. Defaults to
            `1e-6`.
        dropout: float. Dropout rate in training. Defaults to `0`.
        dtype: string or `keras.DTypePolicy`.
        tie_word_embeddings: bool. Whether the output projection reuses the
            token embedding (no `reverse_embeddings` weight). Defaults to
            `True`.
        use_sliding_window_attention: bool. If `True`, every layer attends
            only to the last `sliding_window_size` positions (the query's
            own included). Defaults to `False`.
        sliding_window_size: int. Width of that window. Defaults to `32768`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.qwen import QwenBackbone

    model = QwenBackbone(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=6,
        num_key_value_heads=2,
        hidden_dim=48,
        intermediate_dim=64,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 48)
    ```
    """

    presets = QWEN_PRESETS

    @staticmethod
    def _layout_rules(config):
        return llama_style_rules(
            tied=config.get("tie_word_embeddings", True), use_bias=True
        )

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_query_heads,
        num_key_value_heads,
        hidden_dim,
        intermediate_dim,
        rope_max_wavelength=10000,
        rope_scaling_factor=1.0,
        layer_norm_epsilon=1e-6,
        dropout=0,
        dtype=None,
        tie_word_embeddings=True,
        use_sliding_window_attention=False,
        sliding_window_size=32768,
        **kwargs,
    ):
        build_llama_style_from(
            self,
            locals(),
            attention_options=qwen_attention_options(
                use_sliding_window_attention, sliding_window_size
            ),
        )
