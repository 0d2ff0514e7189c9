"""GPT-2 decoder backbone."""

import keras

from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.decoder_layer import DecoderLayer
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import position_embedding_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.layers.token_and_position_embedding import PositionEmbedding
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.decoder import init_decoder_graph
from keras_nlp.models.gpt2.gpt2_presets import GPT2_PRESETS

# keras-hub's `TransformerDecoder` names its norms this way (GPT-2 and OPT).
BLOCK_NORM_NAMES = {
    "attention_norm": "self_attention_layer_norm",
    "feedforward_norm": "feedforward_layer_norm",
}
# Every checkpoint of this family uses this epsilon; keras-hub fixes it.
LAYER_NORM_EPSILON = 1e-5


def check_decoder_arguments(
    vocabulary_size,
    num_layers,
    num_heads,
    hidden_dim,
    intermediate_dim,
    dropout,
    max_sequence_length,
):
    """Raises a `ValueError` naming the first bad constructor argument."""
    for name, value in (
        ("vocabulary_size", vocabulary_size),
        ("num_layers", num_layers),
        ("num_heads", num_heads),
        ("hidden_dim", hidden_dim),
        ("intermediate_dim", intermediate_dim),
        ("max_sequence_length", max_sequence_length),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(
                f"`{name}` must be a positive integer. Received: "
                f"{name}={value!r}."
            )
    if hidden_dim % num_heads:
        raise ValueError(
            "`hidden_dim` must be divisible by `num_heads` (each head is "
            f"hidden_dim // num_heads wide). Received: hidden_dim="
            f"{hidden_dim}, num_heads={num_heads}."
        )
    if not 0 <= dropout < 1:
        raise ValueError(
            f"`dropout` must be in [0, 1). Received: dropout={dropout!r}."
        )


def learned_position_decoder_layers(
    num_layers,
    num_heads,
    hidden_dim,
    intermediate_dim,
    activation,
    dropout,
    kernel_initializer,
    dtype,
):
    """The pre-LayerNorm blocks of GPT-2 and OPT.

    Multi-head attention and a plain two-layer MLP, both with biases, no
    rotary embedding (positions were added to the embeddings).

    Args:
        kernel_initializer: a function returning a new initializer, so
            that no two blocks draw the same values.
    """
    layers = []
    for index in range(num_layers):
        attention = CachedGroupedQueryAttention(
            num_query_heads=num_heads,
            num_key_value_heads=num_heads,
            rotary_embedding=None,
            use_bias=True,
            use_output_bias=True,
            dropout=dropout,
            kernel_initializer=kernel_initializer(),
            dtype=dtype,
            name="self_attention",
        )
        layers.append(
            DecoderLayer(
                attention=attention,
                hidden_dim=hidden_dim,
                intermediate_dim=intermediate_dim,
                activation=activation,
                gated=False,
                use_bias=True,
                normalization="layer",
                layer_norm_epsilon=LAYER_NORM_EPSILON,
                dropout=dropout,
                kernel_initializer=kernel_initializer(),
                sublayer_names=BLOCK_NORM_NAMES,
                dtype=dtype,
                name=f"transformer_layer_{index}",
            )
        )
    return layers


def learned_position_decoder_rules(embeddings_prefix):
    """Layout rules of GPT-2 and OPT; their embeddings sit under a prefix."""
    block = r"transformer_layer_\d+/"
    return [
        # GPT-2's vocabulary (50257) divides no axis: its hidden dimension
        # then goes on the model axis, or on both axes of a 2-D mesh.
        *token_embedding_rules(
            embeddings_prefix + "token_embedding/",
            tied=True,
        ),
        *position_embedding_rules(embeddings_prefix + "position_embedding/"),
        *attention_rules(block + "self_attention/", use_bias=True),
        *feedforward_rules(block, gated=False),
    ]


class GPT2Backbone(Backbone):
    """GPT-2 decoder that maps token ids to final-normalized hidden states.

    Token embeddings plus learned absolute position embeddings (the first
    token of every row at position 0, padding included), then `num_layers`
    pre-LayerNorm blocks of multi-head causal self-attention and a
    tanh-GELU MLP, all projections with biases, and a final LayerNorm. The
    token embedding is tied: `token_embedding(x, reverse=True)` gives the
    vocabulary logits.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_heads: int. Attention heads; must divide `hidden_dim`.
        hidden_dim: int. Width of the residual stream and embeddings.
        intermediate_dim: int. Width of each MLP's hidden layer.
        dropout: float. Dropout rate in training: on the summed embeddings,
            the attention probabilities and both residual branches.
            Defaults to `0.1`, as GPT-2 was trained.
        max_sequence_length: int. Rows of the position embedding, the
            longest input the model takes. Defaults to `1024`.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.gpt2.gpt2_backbone import GPT2Backbone

    model = GPT2Backbone(
        vocabulary_size=101,
        num_layers=2,
        num_heads=4,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=16,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    logits = model.token_embedding(hidden_states, reverse=True)  # (2, 4, 101)
    ```
    """

    presets = GPT2_PRESETS

    @staticmethod
    def _layout_rules(config):
        return learned_position_decoder_rules("")

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        max_sequence_length=1024,
        dtype=None,
        **kwargs,
    ):
        check_decoder_arguments(
            vocabulary_size,
            num_layers,
            num_heads,
            hidden_dim,
            intermediate_dim,
            dropout,
            max_sequence_length,
        )

        # === Layers ===
        self.token_embedding = keras.layers.ReversibleEmbedding(
            input_dim=vocabulary_size,
            output_dim=hidden_dim,
            tie_weights=True,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=0.01),
            dtype=dtype,
            name="token_embedding",
        )
        self.position_embedding = PositionEmbedding(
            sequence_length=max_sequence_length,
            initializer=keras.initializers.RandomNormal(stddev=0.02),
            dtype=dtype,
            name="position_embedding",
        )
        self.embeddings_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embeddings_dropout"
        )
        self.transformer_layers = learned_position_decoder_layers(
            num_layers=num_layers,
            num_heads=num_heads,
            hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            activation="gelu_approximate",
            dropout=dropout,
            kernel_initializer=lambda: keras.initializers.RandomNormal(
                stddev=0.02
            ),
            dtype=dtype,
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype=dtype, name="layer_norm"
        )

        # === Functional graph ===
        def embed(token_ids):
            x = self.token_embedding(token_ids)
            x = x + self.position_embedding(x)
            return self.embeddings_dropout(x)

        init_decoder_graph(
            self,
            embed=embed,
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
                "max_sequence_length": self.max_sequence_length,
            }
        )
        return config
