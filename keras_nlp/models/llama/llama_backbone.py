"""Llama and Llama 2 decoder backbone."""

from keras_nlp.models.backbone import Backbone
from keras_nlp.models.families.llama import build_llama_style_from
from keras_nlp.models.families.llama import llama_style_rules
from keras_nlp.models.llama.llama_presets import LLAMA_PRESETS
from keras_nlp.models.llama.llama_rotary_embedding import LlamaRotaryEmbedding


class LlamaBackbone(Backbone):
    """Llama decoder that maps token ids to final-normalized hidden states.

    Pre-norm blocks of RMSNorm, grouped-query self-attention with rotary
    position embedding, and a SwiGLU feed-forward.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_query_heads: int. Query heads per attention layer.
        hidden_dim: int. Width of the residual stream; `head_dim` is
            `hidden_dim // num_query_heads`.
        intermediate_dim: int. Width of the feed-forward.
        num_key_value_heads: int. Key/value heads; must divide
            `num_query_heads`.
        rope_max_wavelength: int. RoPE base. Defaults to `10000`.
        rope_position_scaling_factor: float. Positions are divided by it
            (linear interpolation). Defaults to `1.0`.
        rope_frequency_adjustment_factor: float or `None`. Llama 3.1 RoPE
            scaling; with it, the next three must be set too.
        rope_low_freq_factor: float or `None`.
        rope_high_freq_factor: float or `None`.
        rope_pretraining_sequence_length: int or `None`.
        layer_norm_epsilon: float. Epsilon of the RMS norms. Defaults to
            `1e-6`.
        dropout: float. Dropout rate in training. Defaults to `0`.
        dtype: string or `keras.DTypePolicy`.
        tie_word_embeddings: bool. Whether the output projection reuses the
            token embedding (no `reverse_embeddings` weight). Defaults to
            `False`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.llama import LlamaBackbone

    model = LlamaBackbone(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=2,
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

    presets = LLAMA_PRESETS

    @staticmethod
    def _layout_rules(config):
        return llama_style_rules(tied=config.get("tie_word_embeddings"))

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_query_heads,
        hidden_dim,
        intermediate_dim,
        num_key_value_heads,
        rope_max_wavelength=10000,
        rope_position_scaling_factor=1.0,
        rope_frequency_adjustment_factor=None,
        rope_low_freq_factor=None,
        rope_high_freq_factor=None,
        rope_pretraining_sequence_length=None,
        layer_norm_epsilon=1e-6,
        dropout=0,
        dtype=None,
        tie_word_embeddings=False,
        **kwargs,
    ):
        build_llama_style_from(
            self,
            locals(),
            rotary_embedding=lambda: LlamaRotaryEmbedding(
                max_wavelength=rope_max_wavelength,
                scaling_factor=rope_position_scaling_factor,
                frequency_adjustment_factor=rope_frequency_adjustment_factor,
                low_freq_factor=rope_low_freq_factor,
                high_freq_factor=rope_high_freq_factor,
                pretraining_sequence_length=rope_pretraining_sequence_length,
                dtype=dtype,
                name="rotary_embedding",
            ),
        )
