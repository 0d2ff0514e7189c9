"""GPT-OSS decoder backbone: a Llama-style MoE with attention sinks."""

import keras

from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import sparse_moe_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.layers.sparse_moe import SparseMoE
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.construction import check_no_router_logits
from keras_nlp.models.families.llama import build_llama_style
from keras_nlp.models.gpt_oss.gpt_oss_presets import GPT_OSS_PRESETS
from keras_nlp.models.gpt_oss.yarn_rotary_embedding import YarnRotaryEmbedding

MOE_BLOCK = "sparse_moe_block"
# keras-hub's paths: `router/router_dense/{kernel,bias}` and
# `experts/{gate_up_proj,down_proj}` with `_bias` twins.
MOE_NAMES = {
    "router": "router/router_dense",
    "experts": "experts",
    "gate": "gate_up_proj",
    "output": "down_proj",
    "gate_bias": "gate_up_proj_bias",
    "output_bias": "down_proj_bias",
}
BLOCK_NAMES = {
    "attention_norm": "input_layernorm",
    "feedforward_norm": "post_attention_layernorm",
}
# The experts' clamped SwiGLU: `(clip(up, -7, 7) + 1) * g * sigmoid(1.702 g)`
# with `g = min(gate, 7)`.
EXPERT_CLAMP_LIMIT = 7.0
# GPT-OSS's YaRN: the pretraining context, the blend band, no rounding.
YARN_OPTIONS = dict(
    original_max_position_embeddings=4096,
    beta_fast=32.0,
    beta_slow=1.0,
    truncate=False,
)


def is_sliding_window_layer(index):
    """Whether block `index` attends through the sliding window.

    keras-hub's GPT-OSS windows the odd blocks (1, 3, ...); the blocks in
    between attend to the whole causal prefix.
    """
    return index % 2 == 1


class GptOssBackbone(Backbone):
    """GPT-OSS decoder mapping token ids to final-normalized hidden states.

    Pre-norm RMSNorm blocks of grouped-query attention and a sparse
    mixture of experts, as in Mixtral, with these differences:

    - attention has biases on all four projections and a learned logit per
      query head (`sinks`) that joins every query's softmax denominator;
    - odd blocks see only the `sliding_window` tokens before the query
      (and the query), even blocks the whole prefix;
    - RoPE with YaRN's context extension (`rope_scaling_factor` times 4096
      positions);
    - the router has a bias; each token keeps its `top_k` largest logits
      and weights those experts by their softmax;
    - experts have biases and one fused, interleaved gate/up weight
      `gate_up_proj` (gate in the even columns), and a clamped SwiGLU:
      `(clip(up, -7, 7) + 1) * g * sigmoid(1.702 g)` with `g = min(gate, 7)`.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_query_heads: int. Query heads per attention layer.
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Feed-forward width of each expert.
        num_key_value_heads: int. Key/value heads; must divide
            `num_query_heads`.
        num_experts: int. Experts per block.
        top_k: int. Experts per token. Defaults to `2`.
        rope_max_wavelength: int or float. RoPE base. Defaults to `10000`.
        rope_scaling_factor: float, at least 1. YaRN's factor; `1` is plain
            RoPE. Defaults to `1.0`.
        layer_norm_epsilon: float. Epsilon of the RMS norms. Defaults to
            `1e-6`.
        sliding_window: int or `None`. In the odd blocks a query attends to
            itself and the `sliding_window` tokens before it (keras-hub's
            count); `None` windows no block. Defaults to `4096`.
        head_dim: int or `None`. Size of each head; `None` means
            `hidden_dim // num_query_heads`.
        dropout: float. Dropout rate in training. Defaults to `0`.
        output_router_logits: bool. keras-hub's argument, kept for its
            positional order; only `False` is supported (the backbone
            outputs hidden states).
        dtype: string or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.gpt_oss import GptOssBackbone

    model = GptOssBackbone(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=4,
        hidden_dim=32,
        intermediate_dim=16,
        num_key_value_heads=2,
        num_experts=4,
        top_k=2,
        sliding_window=2,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    ```
    """

    presets = GPT_OSS_PRESETS

    @staticmethod
    def _layout_rules(config):
        block = r"transformer_layer_\d+/"
        # The sinks `(heads,)` and the router bias `(experts,)` are small
        # and replicated: no rule.
        return [
            *token_embedding_rules("token_embedding/", tied=False),
            *attention_rules(block + "self_attention/", use_bias=True),
            *sparse_moe_rules(
                block + MOE_BLOCK + "/",
                sublayer_names=MOE_NAMES,
                fused_gate_intermediate=True,
                expert_bias_names=(
                    MOE_NAMES["gate_bias"],
                    MOE_NAMES["output_bias"],
                ),
            ),
        ]

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
        rope_max_wavelength=10000,
        rope_scaling_factor=1.0,
        layer_norm_epsilon=1e-6,
        sliding_window: int | None = 4096,
        head_dim=None,
        dropout=0,
        output_router_logits=False,
        dtype=None,
        **kwargs,
    ):
        check_no_router_logits("GptOssBackbone", output_router_logits)

        def attention_options(index):
            window = None
            if sliding_window is not None and is_sliding_window_layer(index):
                # Ours counts the query in the window; keras-hub's doesn't.
                window = sliding_window + 1
            return {
                "use_bias": True,
                "use_output_bias": True,
                "use_sinks": True,
                "sliding_window_size": window,
            }

        build_llama_style(
            self,
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            hidden_dim=hidden_dim,
            num_query_heads=num_query_heads,
            num_key_value_heads=num_key_value_heads,
            head_dim=head_dim,
            rotary_embedding=lambda: YarnRotaryEmbedding(
                max_wavelength=rope_max_wavelength,
                factor=rope_scaling_factor,
                **YARN_OPTIONS,
                dtype=dtype,
                name="rotary_embedding",
            ),
            attention_options=attention_options,
            feedforward=lambda index: SparseMoE(
                num_experts=num_experts,
                intermediate_dim=intermediate_dim,
                top_k=top_k,
                activation="quick_gelu",
                routing="top_k_then_softmax",
                use_router_bias=True,
                use_expert_bias=True,
                fused_gate_intermediate=True,
                fused_layout="interleaved",
                clamp_limit=EXPERT_CLAMP_LIMIT,
                intermediate_offset=1.0,
                kernel_initializer=keras.initializers.RandomNormal(stddev=0.02),
                sublayer_names=MOE_NAMES,
                dtype=dtype,
                name=MOE_BLOCK,
            ),
            layer_norm_epsilon=layer_norm_epsilon,
            dropout=dropout,
            tie_word_embeddings=False,
            block_names=BLOCK_NAMES,
            dtype=dtype,
            **kwargs,
        )
