"""GPT-OSS decoder backbone: a Llama-style MoE with attention sinks."""

import keras

from keras_nlp.layers.layout_rules import sparse_moe_rules
from keras_nlp.layers.sparse_moe import SparseMoE
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.construction import check_no_router_logits
from keras_nlp.models.families.llama import BLOCK
from keras_nlp.models.families.llama import build_llama_style_from
from keras_nlp.models.families.llama import llama_style_rules
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


LAYER_TYPES = ("sliding_attention", "full_attention")
"""The values of `layer_types` (Hugging Face's names)."""


def is_sliding_window_layer(index, layer_types=None):
    """Whether block `index` attends through the sliding window.

    Args:
        index: int, the block.
        layer_types: `None` for keras-hub's pattern, which windows the odd
            blocks (1, 3, ...) and lets the blocks in between attend to the
            whole causal prefix; or one of `LAYER_TYPES` per block.
    """
    if layer_types is None:
        return index % 2 == 1
    return layer_types[index] == "sliding_attention"


def check_layer_types(layer_types, num_layers, sliding_window):
    """Raises a `ValueError` naming a malformed `layer_types`."""
    if layer_types is None:
        return
    if isinstance(layer_types, str) or not isinstance(
        layer_types, (list, tuple)
    ):
        raise ValueError(
            "GptOssBackbone: `layer_types` must be None or a list of "
            f"{num_layers} (num_layers) strings, each one of {LAYER_TYPES}. "
            f"Received: layer_types={layer_types!r}."
        )
    unknown = [t for t in layer_types if t not in LAYER_TYPES]
    if len(layer_types) != num_layers or unknown:
        problem = (
            f"unknown value(s) {unknown}"
            if unknown
            else f"{len(layer_types)} entries"
        )
        raise ValueError(
            f"GptOssBackbone: `layer_types` needs {num_layers} entries "
            f"(num_layers), each one of {LAYER_TYPES}; it has {problem}. "
            f"Received: layer_types={list(layer_types)!r}."
        )
    windowed = [i for i, t in enumerate(layer_types) if t != "full_attention"]
    if sliding_window is None and windowed:
        raise ValueError(
            f"GptOssBackbone: `layer_types` windows the blocks {windowed} "
            "but sliding_window=None. Pass a window size, or "
            "'full_attention' for every block."
        )


class GptOssBackbone(Backbone):
    """GPT-OSS decoder mapping token ids to final-normalized hidden states.

    Pre-norm RMSNorm blocks of grouped-query attention and a sparse
    mixture of experts, as in Mixtral, with these differences:

    - attention has biases on all four projections and a learned logit per
      query head (`sinks`) that joins every query's softmax denominator;
    - the odd blocks (or those `layer_types` names) see only the
      `sliding_window` tokens before the query (and the query), the others
      the whole prefix;
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
        sliding_window: int or `None`. In the windowed blocks a query
            attends to itself and the `sliding_window` tokens before it
            (keras-hub's count); `None` windows no block. Defaults to
            `4096`.
        head_dim: int or `None`. Size of each head; `None` means
            `hidden_dim // num_query_heads`.
        dropout: float. Dropout rate in training. Defaults to `0`.
        output_router_logits: bool. keras-hub's argument, kept for its
            positional order; only `False` is supported (the backbone
            outputs hidden states).
        dtype: string or `keras.DTypePolicy`.
        layer_types: list of strings or `None` (keyword-only). Which blocks
            are windowed, one `"sliding_attention"` or `"full_attention"`
            per block (Hugging Face's `layer_types`). `None`, the default,
            windows the odd blocks 1, 3, ... as keras-hub does; OpenAI's
            checkpoints window the even ones 0, 2, ...
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
        # The sinks `(heads,)` and the router bias `(experts,)` are small
        # and replicated: no rule.
        experts = sparse_moe_rules(
            BLOCK + MOE_BLOCK + "/",
            sublayer_names=MOE_NAMES,
            fused_gate_intermediate=True,
            expert_bias_names=(
                MOE_NAMES["gate_bias"],
                MOE_NAMES["output_bias"],
            ),
        )
        return llama_style_rules(tied=False, feedforward=experts, use_bias=True)

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
        *,
        layer_types=None,
        **kwargs,
    ):
        check_no_router_logits("GptOssBackbone", output_router_logits)
        check_layer_types(layer_types, num_layers, sliding_window)

        def attention_options(index):
            window = None
            if sliding_window is not None and is_sliding_window_layer(
                index, layer_types
            ):
                # Ours counts the query in the window; keras-hub's doesn't.
                window = sliding_window + 1
            return {
                "use_bias": True,
                "use_output_bias": True,
                "use_sinks": True,
                "sliding_window_size": window,
            }

        build_llama_style_from(
            self,
            locals(),
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
            block_names=BLOCK_NAMES,
        )
