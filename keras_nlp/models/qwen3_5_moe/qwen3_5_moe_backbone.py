"""Qwen 3.5 MoE decoder backbone (text): Qwen 3.5 with shared-expert MoE."""

import keras

from keras_nlp.layers.shared_expert_moe import SharedExpertSparseMoE
from keras_nlp.layers.shared_expert_moe import shared_expert_moe_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.qwen3_5.qwen3_5_backbone import BLOCK
from keras_nlp.models.qwen3_5.qwen3_5_backbone import build_qwen3_5_stack
from keras_nlp.models.qwen3_5.qwen3_5_backbone import check_text_only
from keras_nlp.models.qwen3_5.qwen3_5_backbone import qwen3_5_rules
from keras_nlp.models.qwen3_5_moe.qwen3_5_moe_presets import QWEN3_5_MOE_PRESETS

MOE_BLOCK = "sparse_moe_block"
# keras-hub's names inside the block.
ROUTER_NAMES = {"router": "router_gate"}
SHARED_EXPERT = "shared_expert"
SHARED_EXPERT_GATE = "shared_expert_gate"
SUBLAYER_NAMES = {
    **ROUTER_NAMES,
    "shared_expert": SHARED_EXPERT,
    "shared_expert_gate": SHARED_EXPERT_GATE,
}


class Qwen3_5MoeBackbone(Backbone):
    """Qwen 3.5 MoE's text decoder mapping token ids to hidden states.

    Qwen 3.5's blocks (Gated DeltaNet linear attention, and gated full
    attention every fourth block) whose feed-forward is a mixture of
    `num_experts` SwiGLU experts, `top_k` per token (their router
    probabilities renormalized to sum to one), plus a shared SwiGLU expert
    of width `shared_expert_intermediate_size` scaled per token by
    `sigmoid` of its gate. Paths and shapes are keras-hub's (the experts'
    gate and up kernels fused, `(experts, hidden, 2 * moe_intermediate_dim)`).
    Text only: passing a `vision_encoder` raises.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of blocks.
        num_query_heads: int. Query heads of the full attention blocks.
        num_key_value_heads: int. Their key/value heads.
        head_dim: int. Their head size.
        hidden_dim: int. Width of the residual stream.
        moe_intermediate_dim: int. Width of each routed expert.
        shared_expert_intermediate_size: int. Width of the shared expert.
        num_experts: int. Routed experts per block.
        top_k: int. Experts per token.
        layer_types: list of `"linear_attention"` / `"full_attention"`, or
            `None`: every fourth block full. Defaults to `None`.
        partial_rotary_factor: float. Defaults to `0.25`.
        rope_max_wavelength: float. Defaults to `10000`.
        rope_scaling_factor: float. Defaults to `1.0`.
        layer_norm_epsilon: float. Defaults to `1e-6`.
        dropout: float. Defaults to `0`.
        tie_word_embeddings: bool. Defaults to `False`.
        sliding_window_size: int or `None`. Defaults to `32768`, as
            keras-hub; the presets use `None`.
        linear_num_key_heads: int. Defaults to `16`.
        linear_num_value_heads: int. Defaults to `32`.
        linear_key_head_dim: int. Defaults to `128`.
        linear_value_head_dim: int. Defaults to `128`.
        linear_conv_kernel_dim: int. Defaults to `4`.
        vision_encoder: must be `None`. Defaults to `None`.
        mrope_section: list or `None`. No effect on text. Defaults to
            `None`.
        router_aux_loss_coefficient: float. Weight of each block's
            load-balancing loss in training. Defaults to `0.001`.
        dtype: string or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.qwen3_5_moe import Qwen3_5MoeBackbone

    model = Qwen3_5MoeBackbone(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        hidden_dim=32,
        moe_intermediate_dim=16,
        shared_expert_intermediate_size=24,
        num_experts=4,
        top_k=2,
        layer_types=["linear_attention", "full_attention"],
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=8,
        linear_value_head_dim=8,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    ```
    """

    presets = QWEN3_5_MOE_PRESETS

    @staticmethod
    def _layout_rules(config):
        return qwen3_5_rules(
            config,
            shared_expert_moe_rules(
                BLOCK + MOE_BLOCK + "/",
                fused_gate_intermediate=True,
                sublayer_names=SUBLAYER_NAMES,
            ),
        )

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_query_heads,
        num_key_value_heads,
        head_dim,
        hidden_dim,
        moe_intermediate_dim,
        shared_expert_intermediate_size,
        num_experts,
        top_k,
        layer_types=None,
        partial_rotary_factor=0.25,
        rope_max_wavelength=10000,
        rope_scaling_factor=1.0,
        layer_norm_epsilon=1e-6,
        dropout=0.0,
        tie_word_embeddings=False,
        sliding_window_size: int | None = 32768,
        linear_num_key_heads=16,
        linear_num_value_heads=32,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
        vision_encoder=None,
        mrope_section=None,
        router_aux_loss_coefficient=0.001,
        dtype=None,
        **kwargs,
    ):
        check_text_only("Qwen3_5MoeBackbone", vision_encoder)
        initializer = keras.initializers.RandomNormal(stddev=0.02)

        def moe(index):
            del index
            return None, SharedExpertSparseMoE(
                num_experts=num_experts,
                intermediate_dim=moe_intermediate_dim,
                shared_intermediate_dim=shared_expert_intermediate_size,
                top_k=top_k,
                normalize_top_k=True,
                fused_gate_intermediate=True,
                router_aux_loss_coef=router_aux_loss_coefficient,
                kernel_initializer=initializer,
                sublayer_names=SUBLAYER_NAMES,
                dtype=dtype,
                name=MOE_BLOCK,
            )

        build_qwen3_5_stack(self, locals(), moe)
