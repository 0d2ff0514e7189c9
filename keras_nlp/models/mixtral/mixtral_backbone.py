"""Mixtral decoder backbone: Mistral with sparse mixture-of-experts blocks."""

import keras

from keras_nlp.layers.layout_rules import sparse_moe_rules
from keras_nlp.layers.sparse_moe import SparseMoE
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.construction import check_no_router_logits
from keras_nlp.models.families.llama import BLOCK
from keras_nlp.models.families.llama import build_llama_style_from
from keras_nlp.models.families.llama import llama_style_rules
from keras_nlp.models.mixtral.mixtral_presets import MIXTRAL_PRESETS

MOE_BLOCK = "mixtral_sparse_moe_block"


class MixtralBackbone(Backbone):
    """Mixtral decoder that maps token ids to final-normalized hidden states.

    Mistral's blocks (RMSNorm, grouped-query attention with RoPE and an
    optional sliding window) with each feed-forward replaced by a sparse
    mixture of `num_experts` SwiGLU experts: a router sends every token to
    its `top_k` most probable experts, whose outputs are summed with the
    router probabilities renormalized over those experts.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_query_heads: int. Query heads per attention layer.
        hidden_dim: int. Width of the residual stream; `head_dim` is
            `hidden_dim // num_query_heads`.
        intermediate_dim: int. Feed-forward width of each expert.
        num_key_value_heads: int. Key/value heads; must divide
            `num_query_heads`.
        num_experts: int. Experts per block.
        top_k: int. Experts per token. Defaults to `2`.
        router_jitter_noise: float. In training, multiplies each block's
            feed-forward input by uniform noise in
            `[1 - noise, 1 + noise]`. Defaults to `0`.
        rope_max_wavelength: int or float. RoPE base. Defaults to `10000`.
        rope_scaling_factor: float. Positions are divided by it. Defaults
            to `1.0`.
        layer_norm_epsilon: float. Epsilon of the RMS norms. Defaults to
            `1e-6`.
        router_aux_loss_coef: float. Weight of each block's load-balancing
            loss, added to `model.losses` in training. Defaults to `0.02`.
        sliding_window: int or `None`. Attention window in tokens; `None`
            attends to the whole causal prefix. Defaults to `512`.
        dropout: float. Dropout rate in training. Defaults to `0`.
        dtype: string or `keras.DTypePolicy`.
        output_router_logits: bool. keras-hub's argument, kept for its
            positional order; only `False` is supported (the backbone
            outputs hidden states; the router's load-balancing loss is
            added in training with `router_aux_loss_coef`).
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.mixtral import MixtralBackbone

    model = MixtralBackbone(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=2,
        hidden_dim=32,
        intermediate_dim=48,
        num_experts=4,
        top_k=2,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    ```
    """

    presets = MIXTRAL_PRESETS

    @staticmethod
    def _layout_rules(config):
        return llama_style_rules(
            tied=False, feedforward=sparse_moe_rules(BLOCK + MOE_BLOCK + "/")
        )

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_query_heads,
        hidden_dim,
        intermediate_dim,
        num_key_value_heads,
        num_experts,
        top_k=2,
        router_jitter_noise=0.0,
        rope_max_wavelength=10000,
        rope_scaling_factor=1.0,
        layer_norm_epsilon=1e-6,
        router_aux_loss_coef=0.02,
        sliding_window: int | None = 512,
        dropout=0,
        dtype=None,
        output_router_logits=False,
        **kwargs,
    ):
        check_no_router_logits(
            "MixtralBackbone", output_router_logits, "router_aux_loss_coef"
        )
        build_llama_style_from(
            self,
            locals(),
            attention_options={"sliding_window_size": sliding_window},
            feedforward=lambda index: SparseMoE(
                num_experts=num_experts,
                intermediate_dim=intermediate_dim,
                top_k=top_k,
                activation="silu",
                normalize_top_k=True,
                router_jitter_noise=router_jitter_noise,
                router_aux_loss_coef=router_aux_loss_coef,
                kernel_initializer=keras.initializers.RandomNormal(stddev=0.02),
                dtype=dtype,
                name=MOE_BLOCK,
            ),
        )
