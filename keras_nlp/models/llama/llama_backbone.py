"""Llama and Llama 2 decoder backbone."""

import keras

from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.decoder_layer import DecoderLayer
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.decoder import init_decoder_graph
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
        tie_word_embeddings: bool. Whether the output projection reuses the
            token embedding (no `reverse_embeddings` weight). Defaults to
            `False`.
        dtype: string or `keras.DTypePolicy`.
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
        block = r"transformer_layer_\d+/"
        return [
            *token_embedding_rules(
                "token_embedding/", tied=config.get("tie_word_embeddings")
            ),
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
        rope_position_scaling_factor=1.0,
        rope_frequency_adjustment_factor=None,
        rope_low_freq_factor=None,
        rope_high_freq_factor=None,
        rope_pretraining_sequence_length=None,
        layer_norm_epsilon=1e-6,
        dropout=0,
        tie_word_embeddings=False,
        dtype=None,
        **kwargs,
    ):
        if hidden_dim % num_query_heads:
            raise ValueError(
                "`hidden_dim` must be a multiple of `num_query_heads`. "
                f"Received: hidden_dim={hidden_dim}, "
                f"num_query_heads={num_query_heads}."
            )
        # === Layers ===
        self.token_embedding = keras.layers.ReversibleEmbedding(
            input_dim=vocabulary_size,
            output_dim=hidden_dim,
            tie_weights=tie_word_embeddings,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=0.01),
            dtype=dtype,
            name="token_embedding",
        )
        kernel_initializer = keras.initializers.RandomNormal(stddev=0.02)
        self.transformer_layers = []
        for index in range(num_layers):
            rotary_embedding = LlamaRotaryEmbedding(
                max_wavelength=rope_max_wavelength,
                scaling_factor=rope_position_scaling_factor,
                frequency_adjustment_factor=rope_frequency_adjustment_factor,
                low_freq_factor=rope_low_freq_factor,
                high_freq_factor=rope_high_freq_factor,
                pretraining_sequence_length=rope_pretraining_sequence_length,
                dtype=dtype,
                name="rotary_embedding",
            )
            attention = CachedGroupedQueryAttention(
                num_query_heads=num_query_heads,
                num_key_value_heads=num_key_value_heads,
                rotary_embedding=rotary_embedding,
                dropout=dropout,
                kernel_initializer=kernel_initializer,
                dtype=dtype,
                name="self_attention",
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
        self.rope_position_scaling_factor = rope_position_scaling_factor
        self.rope_frequency_adjustment_factor = rope_frequency_adjustment_factor
        self.rope_low_freq_factor = rope_low_freq_factor
        self.rope_high_freq_factor = rope_high_freq_factor
        self.rope_pretraining_sequence_length = rope_pretraining_sequence_length
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = dropout
        self.tie_word_embeddings = tie_word_embeddings

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
                "rope_position_scaling_factor": (
                    self.rope_position_scaling_factor
                ),
                "rope_frequency_adjustment_factor": (
                    self.rope_frequency_adjustment_factor
                ),
                "rope_low_freq_factor": self.rope_low_freq_factor,
                "rope_high_freq_factor": self.rope_high_freq_factor,
                "rope_pretraining_sequence_length": (
                    self.rope_pretraining_sequence_length
                ),
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "dropout": self.dropout,
                "tie_word_embeddings": self.tie_word_embeddings,
            }
        )
        return config
