"""GPT-NeoX decoder backbone (Pythia, GPT-NeoX-20B)."""

import keras

from keras_nlp.distribution import DATA
from keras_nlp.distribution import MODEL
from keras_nlp.layers.decoder_layer import DecoderLayer
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.decoder import init_decoder_graph
from keras_nlp.models.gpt_neo_x.gpt_neo_x_attention import GPTNeoXAttention
from keras_nlp.models.gpt_neo_x.gpt_neo_x_attention import (
    gpt_neo_x_kernel_initializer,
)
from keras_nlp.models.gpt_neo_x.gpt_neo_x_presets import GPT_NEO_X_PRESETS

# keras-hub's names for the two layer norms of a block.
_SUBLAYER_NAMES = {
    "attention_norm": "self_attention_layer_norm",
    "feedforward_norm": "feedforward_layer_norm",
}


def _check_arguments(
    vocabulary_size,
    num_layers,
    num_heads,
    hidden_dim,
    intermediate_dim,
    rotary_percentage,
):
    for name, value in (
        ("vocabulary_size", vocabulary_size),
        ("num_layers", num_layers),
        ("num_heads", num_heads),
        ("hidden_dim", hidden_dim),
        ("intermediate_dim", intermediate_dim),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(
                f"`{name}` must be a positive integer. Received: "
                f"{name}={value!r}."
            )
    if hidden_dim % num_heads:
        raise ValueError(
            "`hidden_dim` must be divisible by `num_heads`. Received: "
            f"hidden_dim={hidden_dim}, num_heads={num_heads}."
        )
    if not 0 <= rotary_percentage <= 1:
        raise ValueError(
            "`rotary_percentage` must be in [0, 1]. Received: "
            f"rotary_percentage={rotary_percentage}."
        )
    head_dim = hidden_dim // num_heads
    rotary_dim = int(head_dim * rotary_percentage)
    if rotary_dim % 2:
        raise ValueError(
            "The rotated part of each head, int(head_dim * "
            "rotary_percentage), must be even (rotary embedding rotates "
            f"feature pairs). Received: rotary_percentage={rotary_percentage}"
            f" with head_dim={head_dim} (hidden_dim // num_heads), giving "
            f"{rotary_dim}."
        )


class GPTNeoXBackbone(Backbone):
    """GPT-NeoX decoder that maps token ids to final-normalized hidden states.

    Token embeddings (no position embeddings: positions enter through a
    rotary embedding on part of every query and key head) feed `num_layers`
    blocks in which attention and the MLP read the same input and both add
    to the residual stream; a final layer normalization follows. This is the
    architecture of EleutherAI's Pythia models and GPT-NeoX-20B, with the
    keras-hub variable layout (a fused query/key/value kernel of shape
    `(hidden_dim, num_heads, 3 * head_dim)`).

    Args:
        vocabulary_size: int. Number of rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_heads: int. Attention heads per block; must divide `hidden_dim`.
        hidden_dim: int. Width of the residual stream and embeddings.
        intermediate_dim: int. Width of each MLP's hidden layer.
        dropout: float. Dropout rate used in training, on the embeddings,
            the attention probabilities and both residual branches.
            Defaults to `0`.
        rotary_percentage: float. Fraction of each head's features that get
            the rotary embedding; `int(head_dim * rotary_percentage)` must
            be even. Defaults to `0.25`.
        rotary_max_wavelength: int. Base wavelength of the rotary embedding.
            Defaults to `10000`.
        layer_norm_epsilon: float. Epsilon of every layer normalization.
            Defaults to `1e-5`.
        max_sequence_length: int. Longest sequence the model was trained
            on; recorded in the config, it creates no variable. Defaults to
            `512`.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
            Layer normalizations and attention softmaxes run in float32.
        **kwargs: Forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.gpt_neo_x.gpt_neo_x_backbone import GPTNeoXBackbone

    model = GPTNeoXBackbone(
        vocabulary_size=64,
        num_layers=2,
        num_heads=4,
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

    presets = GPT_NEO_X_PRESETS
    # LoRA adapts the fused projection (queries, keys and values together).
    lora_target_names = ("query_key_value",)

    @staticmethod
    def _layout_rules(config):
        block = r"transformer_layer_\d+/"
        attention = block + "self_attention/"
        return [
            *token_embedding_rules("token_embedding/", tied=True),
            # Fused (hidden, heads, 3 * head_dim): each head's query, key and
            # value stay together on one device.
            (
                attention + "query_key_value/kernel",
                (DATA, MODEL, None),
                ("hidden", "heads", "qkv_head_dim"),
            ),
            (
                attention + "query_key_value/bias",
                (MODEL, None),
                ("heads", "qkv_head_dim"),
            ),
            # (heads * head_dim, hidden): input rows are the concatenated
            # heads, so the model axis takes the same heads as above.
            (
                attention + "attention_output/kernel",
                (MODEL, DATA),
                ("heads*head_dim", "hidden"),
            ),
            *feedforward_rules(block, gated=False),
        ]

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.0,
        rotary_percentage=0.25,
        rotary_max_wavelength=10000,
        layer_norm_epsilon=1e-5,
        max_sequence_length=512,
        dtype=None,
        **kwargs,
    ):
        _check_arguments(
            vocabulary_size,
            num_layers,
            num_heads,
            hidden_dim,
            intermediate_dim,
            rotary_percentage,
        )

        # === Layers ===
        self.token_embedding = keras.layers.ReversibleEmbedding(
            vocabulary_size,
            hidden_dim,
            tie_weights=True,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=0.01),
            dtype=dtype,
            name="token_embedding",
        )
        self.embeddings_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embeddings_dropout"
        )
        self.transformer_layers = [
            DecoderLayer(
                attention=GPTNeoXAttention(
                    num_heads=num_heads,
                    rotary_percentage=rotary_percentage,
                    rotary_max_wavelength=rotary_max_wavelength,
                    dropout=dropout,
                    dtype=dtype,
                    name="self_attention",
                ),
                hidden_dim=hidden_dim,
                intermediate_dim=intermediate_dim,
                activation="gelu_approximate",
                gated=False,
                use_bias=True,
                normalization="layer",
                layer_norm_epsilon=layer_norm_epsilon,
                # Attention and MLP both read the block input.
                parallel_residual=True,
                dropout=dropout,
                kernel_initializer=gpt_neo_x_kernel_initializer(),
                sublayer_names=_SUBLAYER_NAMES,
                dtype=dtype,
                name=f"transformer_layer_{index}",
            )
            for index in range(num_layers)
        ]
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="layer_norm"
        )

        # === Functional graph ===
        init_decoder_graph(
            self,
            embed=lambda ids: self.embeddings_dropout(
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
        self.rotary_percentage = rotary_percentage
        self.rotary_max_wavelength = rotary_max_wavelength
        self.layer_norm_epsilon = layer_norm_epsilon
        self.max_sequence_length = max_sequence_length

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
                "rotary_percentage": self.rotary_percentage,
                "rotary_max_wavelength": self.rotary_max_wavelength,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "max_sequence_length": self.max_sequence_length,
            }
        )
        return config
