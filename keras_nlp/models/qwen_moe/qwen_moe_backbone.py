"""Qwen 1.5 MoE decoder backbone: Qwen 2 with shared-expert MoE blocks."""

from keras_nlp.layers.shared_expert_moe import SharedExpertSparseMoE
from keras_nlp.layers.shared_expert_moe import shared_expert_moe_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.construction import check_no_router_logits
from keras_nlp.models.families.llama import BLOCK
from keras_nlp.models.families.llama import build_llama_style_from
from keras_nlp.models.families.llama import llama_style_rules
from keras_nlp.models.families.moe import mixed_feedforward_rules
from keras_nlp.models.families.moe import qwen_moe_feedforward
from keras_nlp.models.qwen.qwen_backbone import qwen_attention_options
from keras_nlp.models.qwen_moe.qwen_moe_presets import QWEN_MOE_PRESETS

MOE_BLOCK = "qwen_sparse_moe_block"
DENSE_BLOCK = "qwen_moe_mlp"


class QwenMoeBackbone(Backbone):
    """Qwen 1.5 MoE decoder mapping token ids to final-normalized states.

    Qwen 2's blocks (RMSNorm, grouped-query attention with RoPE and biases
    on the query, key and value projections) whose feed-forward is a
    mixture of `num_experts` SwiGLU experts, of which a router picks
    `top_k` per token, plus a shared SwiGLU expert that every token goes
    through, scaled by a sigmoid gate. Blocks excluded by
    `decoder_sparse_step` or `mlp_only_layers` have a dense SwiGLU of width
    `intermediate_dim` instead.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_query_heads: int. Query heads per attention layer.
        num_key_value_heads: int. Key/value heads; must divide
            `num_query_heads`.
        hidden_dim: int. Width of the residual stream; `head_dim` is
            `hidden_dim // num_query_heads`.
        intermediate_dim: int. Width of the dense blocks' feed-forward.
        moe_intermediate_dim: int. Feed-forward width of each routed
            expert.
        shared_expert_intermediate_dim: int. Feed-forward width of the
            shared expert.
        num_experts: int. Routed experts per sparse block.
        top_k: int. Experts per token. Defaults to `4`.
        norm_top_k_prob: bool. Renormalize the kept router probabilities
            to sum to one. Defaults to `False`.
        decoder_sparse_step: int. Block `i` is sparse when `i + 1` is a
            multiple of it (and `i` is not in `mlp_only_layers`). Defaults
            to `1`: every block.
        rope_max_wavelength: int or float. RoPE base. Defaults to `10000`.
        rope_scaling_factor: float. Positions are divided by it. Defaults
            to `1.0`.
        layer_norm_epsilon: float. Epsilon of the RMS norms. Defaults to
            `1e-6`.
        dropout: float. Dropout rate in training. Defaults to `0`.
        dtype: string or `keras.DTypePolicy`.
        tie_word_embeddings: bool. Whether the output projection reuses the
            token embedding. Defaults to `False`.
        use_sliding_window_attention: bool. If `True`, every layer attends
            only to the last `sliding_window_size` positions (the query's
            own included). Defaults to `False`.
        sliding_window_size: int. Width of that window. Defaults to `32768`.
        output_router_logits: bool. keras-hub's argument, kept for its
            positional order; only `False` is supported (the backbone
            outputs hidden states; the load-balancing loss is added in
            training with `router_aux_loss_coefficient`).
        router_aux_loss_coefficient: float. Weight of each sparse block's
            load-balancing loss, added to `model.losses` in training.
            Defaults to `0.001`.
        mlp_only_layers: list of block indices whose feed-forward is dense.
            Defaults to `[]`. (keras-hub's class decides every block as if
            it were block 0; this one, like the Hugging Face model, decides
            each block by its index. The presets make every block sparse
            either way.)
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.qwen_moe import QwenMoeBackbone

    model = QwenMoeBackbone(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        moe_intermediate_dim=16,
        shared_expert_intermediate_dim=48,
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

    presets = QWEN_MOE_PRESETS

    @staticmethod
    def _layout_rules(config):
        experts = shared_expert_moe_rules(
            BLOCK + MOE_BLOCK + "/", fused_gate_intermediate=True
        )
        return llama_style_rules(
            tied=config.get("tie_word_embeddings", False),
            feedforward=mixed_feedforward_rules(
                config, BLOCK, experts, DENSE_BLOCK
            ),
            use_bias=True,
        )

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_query_heads,
        num_key_value_heads,
        hidden_dim,
        intermediate_dim,
        moe_intermediate_dim,
        shared_expert_intermediate_dim,
        num_experts,
        top_k=4,
        norm_top_k_prob=False,
        decoder_sparse_step=1,
        rope_max_wavelength=10000,
        rope_scaling_factor=1.0,
        layer_norm_epsilon=1e-6,
        dropout=0,
        dtype=None,
        tie_word_embeddings=False,
        use_sliding_window_attention=False,
        sliding_window_size=32768,
        output_router_logits=False,
        router_aux_loss_coefficient=0.001,
        # keras-hub's default; never mutated.
        mlp_only_layers=[],  # noqa: B006
        **kwargs,
    ):
        check_no_router_logits(
            "QwenMoeBackbone",
            output_router_logits,
            "router_aux_loss_coefficient",
        )
        feedforward = qwen_moe_feedforward(
            locals(),
            SharedExpertSparseMoE,
            MOE_BLOCK,
            DENSE_BLOCK,
            shared_intermediate_dim=shared_expert_intermediate_dim,
        )
        build_llama_style_from(
            self,
            locals(),
            attention_options=qwen_attention_options(
                use_sliding_window_attention, sliding_window_size
            ),
            feedforward=feedforward,
        )
