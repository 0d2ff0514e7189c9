"""Falcon decoder backbone: Falcon-RW, and Falcon 7B/40B/180B by options."""

from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.falcon.falcon_presets import FALCON_PRESETS
from keras_nlp.models.families.bloom import bloom_block_rules
from keras_nlp.models.families.bloom import build_bloom_style_from

# The names of a block's layers in Falcon checkpoints.
ATTENTION = "attention"
BLOCK_NAMES = {
    "attention_norm": "input_layernorm",
    "feedforward_norm": "post_attention_layernorm",
    "intermediate": "dense_h_to_4h",
    "output": "dense_4h_to_h",
}
# Falcon 40B/180B's two norms of a parallel block.
PARALLEL_BLOCK_NAMES = {
    **BLOCK_NAMES,
    "attention_norm": "ln_attn",
    "feedforward_norm": "ln_mlp",
}


def block_names(parallel_residual=False, shared_layer_norm=False):
    """The block's layer names, as the checkpoints of that variant have
    them: a parallel block with two norms calls them `ln_attn`, `ln_mlp`."""
    if parallel_residual and not shared_layer_norm:
        return PARALLEL_BLOCK_NAMES
    return BLOCK_NAMES


class FalconBackbone(Backbone):
    """Falcon decoder that maps token ids to final-normalized hidden states.

    Pre-norm blocks with sequential residuals: multi-head self-attention
    with ALiBi position biases (added before the `1 / sqrt(head_dim)`
    scaling, so the slopes are scaled too) and an exact-GELU feed-forward,
    all projections with biases. No position embedding; the output
    projection reuses the token embedding. This is the architecture of
    Falcon-RW (`falcon_refinedweb_1b_en`), and keras-hub's.

    The keyword-only options build the other Falcons:

    - Falcon-7B: `num_key_value_heads=1` (multi-query),
      `rotary_max_wavelength=10000` (rotary instead of ALiBi),
      `parallel_residual=True, shared_layer_norm=True` (attention and
      feed-forward both read one `input_layernorm`), `use_bias=False`.
    - Falcon-40B/180B: `num_key_value_heads=8` (grouped), rotary,
      `parallel_residual=True` with two norms (`ln_attn`, `ln_mlp`),
      `use_bias=False`.

    Parallel blocks compute
    `x + attention(norm_a(x)) + feedforward(norm_f(x))`, where `norm_f` is
    `norm_a` when shared. In training, dropout hits each branch at its own
    rate (`transformers` drops their sum at `hidden_dropout`); the released
    checkpoints use none.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_attention_heads: int. Attention heads per block; `head_dim` is
            `hidden_dim // num_attention_heads`.
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of the feed-forward.
        layer_norm_epsilon: float. Epsilon of the layer norms. Defaults to
            `1e-5`.
        attention_dropout_rate: float. Dropout in training on the attention
            probabilities and the attention branch's output. Defaults to `0`.
        feedforward_dropout_rate: float. Dropout in training on the
            feed-forward branch's output. Defaults to `0`.
        dtype: string or `keras.DTypePolicy`.
        num_key_value_heads: int or `None`. Keyword-only. Key/value heads,
            each shared by a group of consecutive query heads; must divide
            `num_attention_heads`. `None` (the default) means
            `num_attention_heads` (multi-head attention).
        rotary_max_wavelength: float or `None`. Keyword-only. If set,
            positions enter through a rotary embedding (rotate-half, on all
            of each head's features) of this base wavelength instead of
            ALiBi. Defaults to `None` (ALiBi).
        parallel_residual: bool. Keyword-only. Attention and feed-forward
            both read the block input and add to it, instead of the
            feed-forward reading the attention's residual sum. Defaults to
            `False`.
        shared_layer_norm: bool. Keyword-only. With `parallel_residual`,
            one layer norm (`input_layernorm`) feeds both branches;
            otherwise each has its own (`ln_attn`, `ln_mlp`). Defaults to
            `False`.
        use_bias: bool. Keyword-only. Biases on the attention and
            feed-forward projections. Defaults to `True`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.falcon import FalconBackbone

    model = FalconBackbone(
        vocabulary_size=64,
        num_layers=2,
        num_attention_heads=4,
        hidden_dim=32,
        intermediate_dim=128,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)

    # A Falcon-7B-shaped model: multi-query, rotary, one norm per block.
    falcon_7b_like = FalconBackbone(
        vocabulary_size=64,
        num_layers=2,
        num_attention_heads=4,
        hidden_dim=32,
        intermediate_dim=128,
        num_key_value_heads=1,
        rotary_max_wavelength=10000,
        parallel_residual=True,
        shared_layer_norm=True,
        use_bias=False,
    )
    falcon_7b_like(inputs).shape  # (2, 4, 32)
    ```
    """

    presets = FALCON_PRESETS
    # `enable_lora` adapts the query and value projections by default.
    lora_target_names = ("query_dense", "value_dense")

    @staticmethod
    def _layout_rules(config):
        return [
            *token_embedding_rules("token_embedding/", tied=True),
            *bloom_block_rules(
                ATTENTION,
                block_names(
                    config.get("parallel_residual", False),
                    config.get("shared_layer_norm", False),
                ),
                use_bias=config.get("use_bias", True),
            ),
        ]

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_attention_heads,
        hidden_dim,
        intermediate_dim,
        layer_norm_epsilon=1e-5,
        attention_dropout_rate=0,
        feedforward_dropout_rate=0,
        dtype=None,
        *,
        num_key_value_heads=None,
        rotary_max_wavelength=None,
        parallel_residual=False,
        shared_layer_norm=False,
        use_bias=True,
        **kwargs,
    ):
        if shared_layer_norm and not parallel_residual:
            raise ValueError(
                "`shared_layer_norm=True` needs `parallel_residual=True`: "
                "a sequential block normalizes the attention's residual sum "
                "with its own norm. Received: shared_layer_norm=True, "
                "parallel_residual=False."
            )
        if num_key_value_heads is not None and (
            num_attention_heads % num_key_value_heads
        ):
            raise ValueError(
                "`num_key_value_heads` must divide `num_attention_heads`. "
                f"Received: num_key_value_heads={num_key_value_heads}, "
                f"num_attention_heads={num_attention_heads}."
            )
        build_bloom_style_from(
            self,
            locals(),
            num_heads=num_attention_heads,
            heads_argument="num_attention_heads",
            activation="gelu",
            dropout=attention_dropout_rate,
            feedforward_dropout=feedforward_dropout_rate,
            # ALiBi is added before the logits are scaled.
            scale_alibi=True,
            embeddings_initializer="uniform",
            attention_name=ATTENTION,
            block_names=block_names(parallel_residual, shared_layer_norm),
            shared_norm=shared_layer_norm,
        )
