"""Qwen 3 decoder backbone."""

from keras_nlp.models.backbone import Backbone
from keras_nlp.models.families.llama import build_llama_style_from
from keras_nlp.models.families.llama import llama_style_rules
from keras_nlp.models.qwen3.qwen3_presets import QWEN3_PRESETS

# keras-hub's Qwen 3 query/key norms keep their layer's default epsilon
# rather than `layer_norm_epsilon`; checkpoints in that format expect it.
QUERY_KEY_NORM_EPSILON = 1e-5


def qwen3_attention_options(sliding_window_size, query_key_norm_epsilon):
    """Qwen 3's (and Qwen 3 MoE's) `build_llama_style` attention options.

    Query and key heads are RMS-normalized (epsilon
    `query_key_norm_epsilon`) before RoPE, as keras-hub; the norm
    sublayers are named `query_dense_layernorm` and `key_dense_layernorm`.
    """
    return {
        "use_query_key_norm": True,
        "layer_norm_epsilon": query_key_norm_epsilon,
        "sliding_window_size": sliding_window_size,
    }


class Qwen3Backbone(Backbone):
    """Qwen 3 decoder mapping token ids to final-normalized hidden states.

    Pre-norm RMSNorm blocks, grouped-query attention without biases whose
    query and key heads are RMS-normalized over `head_dim` before RoPE, and
    a SwiGLU feed-forward. `head_dim` is independent of `hidden_dim` (e.g.
    16 heads of 128 on a width of 1024).

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_query_heads: int. Query heads per attention layer.
        num_key_value_heads: int. Key/value heads; must divide
            `num_query_heads`.
        head_dim: int or `None`. Size of each head; `None` means
            `hidden_dim // num_query_heads`.
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of the feed-forward.
        rope_max_wavelength: int. RoPE base. Defaults to `10000`.
        rope_scaling_factor: float. Positions are divided by it (linear
            interpolation). Defaults to `1.0`.
        layer_norm_epsilon: float. Epsilon of the block and final RMS norms
            (the query/key norms use `1e-5`, like keras-hub). Defaults to
            `1e-6`.
        dropout: float. Dropout rate in training. Defaults to `0`.
        tie_word_embeddings: bool. Whether the output projection reuses the
            token embedding (no `reverse_embeddings` weight). Defaults to
            `True`.
        sliding_window_size: int or `None`. If set, every layer attends only
            to the last `sliding_window_size` positions (the query's own
            included); `None` attends to the whole prefix. Defaults to
            `32768`, as in keras-hub; the presets use `None`.
        dtype: string or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.qwen3 import Qwen3Backbone

    model = Qwen3Backbone(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        hidden_dim=32,
        intermediate_dim=64,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    ```
    """

    presets = QWEN3_PRESETS

    @staticmethod
    def _layout_rules(config):
        # The query/key norm scales are (head_dim,): no rule.
        return llama_style_rules(tied=config.get("tie_word_embeddings", True))

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_query_heads,
        num_key_value_heads,
        head_dim: int | None,
        hidden_dim,
        intermediate_dim,
        rope_max_wavelength=10000,
        rope_scaling_factor=1.0,
        layer_norm_epsilon=1e-6,
        dropout=0.0,
        tie_word_embeddings=True,
        sliding_window_size: int | None = 32768,
        dtype=None,
        **kwargs,
    ):
        build_llama_style_from(
            self,
            locals(),
            attention_options=qwen3_attention_options(
                sliding_window_size, QUERY_KEY_NORM_EPSILON
            ),
        )
