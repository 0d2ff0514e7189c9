"""GPT-NeoX decoder backbone (Pythia, GPT-NeoX-20B)."""

from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.construction import check_gelu
from keras_nlp.models.families.gpt import BLOCK
from keras_nlp.models.families.gpt import build_gpt_style_from
from keras_nlp.models.gpt_neo_x.gpt_neo_x_attention import GPTNeoXAttention
from keras_nlp.models.gpt_neo_x.gpt_neo_x_attention import (
    gpt_neo_x_attention_rules,
)
from keras_nlp.models.gpt_neo_x.gpt_neo_x_attention import (
    gpt_neo_x_kernel_initializer,
)
from keras_nlp.models.gpt_neo_x.gpt_neo_x_presets import GPT_NEO_X_PRESETS


class GPTNeoXBackbone(Backbone):
    """GPT-NeoX decoder that maps token ids to final-normalized hidden states.

    Token embeddings (no position embeddings: positions enter through a
    rotary embedding on part of every query and key head) feed `num_layers`
    blocks in which attention and the MLP read the same input and both add
    to the residual stream; a final layer normalization follows. This is the
    architecture of EleutherAI's Pythia models and GPT-NeoX-20B, with the
    keras-hub variable layout (a fused query/key/value kernel of shape
    `(hidden_dim, num_heads, 3 * head_dim)`). The defaults are keras-hub's
    architecture (tanh-approximated GELU, output projection tied to the
    token embedding); Pythia and GPT-NeoX-20B use
    `hidden_activation="gelu"` and `tie_word_embeddings=False`.

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
        hidden_activation: string. Keyword-only. The feed-forward
            activation: `"gelu_approximate"` (tanh-approximated GELU) or
            `"gelu"` (exact, erf-based GELU). Defaults to
            `"gelu_approximate"`.
        tie_word_embeddings: bool. Keyword-only. Whether the output
            projection reuses the token embedding; `False` adds a separate
            `token_embedding/reverse_embeddings` of shape
            `(hidden_dim, vocabulary_size)`. Defaults to `True`.
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
        return [
            *token_embedding_rules(
                "token_embedding/",
                tied=config.get("tie_word_embeddings", True),
            ),
            *gpt_neo_x_attention_rules(BLOCK + "self_attention/"),
            *feedforward_rules(BLOCK, gated=False),
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
        *,
        hidden_activation="gelu_approximate",
        tie_word_embeddings=True,
        **kwargs,
    ):
        check_gelu(hidden_activation)

        def attention():
            return GPTNeoXAttention(
                num_heads=num_heads,
                rotary_percentage=rotary_percentage,
                rotary_max_wavelength=rotary_max_wavelength,
                dropout=dropout,
                dtype=dtype,
                name="self_attention",
            )

        build_gpt_style_from(
            self,
            locals(),
            activation=hidden_activation,
            initializer=gpt_neo_x_kernel_initializer(),
            # Positions enter through the rotary embedding of the attention
            # (`max_sequence_length` creates no variable).
            learned_positions=False,
            attention=attention,
            # Attention and feed-forward both read the block input.
            parallel_residual=True,
        )
