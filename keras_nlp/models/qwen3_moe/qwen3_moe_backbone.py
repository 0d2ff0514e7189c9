"""Qwen 3 MoE decoder backbone: Qwen 3 with sparse mixture-of-experts."""

from keras_nlp.layers.layout_rules import sparse_moe_rules
from keras_nlp.layers.sparse_moe import SparseMoE
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.families.llama import BLOCK
from keras_nlp.models.families.llama import build_llama_style_from
from keras_nlp.models.families.llama import llama_style_rules
from keras_nlp.models.families.moe import mixed_feedforward_rules
from keras_nlp.models.families.moe import qwen_moe_feedforward
from keras_nlp.models.qwen3.qwen3_backbone import qwen3_attention_options
from keras_nlp.models.qwen3_moe.qwen3_moe_presets import QWEN3_MOE_PRESETS

MOE_BLOCK = "qwen3_sparse_moe_block"
DENSE_BLOCK = "qwen3_moe_mlp"
# keras-hub's Qwen 3 MoE query/key norms keep their layer's default epsilon
# (unlike Qwen 3's 1e-5) rather than `layer_norm_epsilon`.
QUERY_KEY_NORM_EPSILON = 1e-6


class Qwen3MoeBackbone(Backbone):
    """Qwen 3 MoE decoder mapping token ids to final-normalized states.

    Qwen 3's blocks (RMSNorm, grouped-query attention without biases whose
    query and key heads are RMS-normalized before RoPE, `head_dim`
    independent of `hidden_dim`) whose feed-forward is a mixture of
    `num_experts` SwiGLU experts, of which a router picks `top_k` per
    token. Blocks excluded by `decoder_sparse_step` or `mlp_only_layers`
    have a dense SwiGLU of width `intermediate_dim` instead.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_query_heads: int. Query heads per attention layer.
        num_key_value_heads: int. Key/value heads; must divide
            `num_query_heads`.
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of the dense blocks' feed-forward.
        moe_intermediate_dim: int. Feed-forward width of each expert.
        num_experts: int. Experts per sparse block.
        head_dim: int or `None`. Size of each head; `None` means
            `hidden_dim // num_query_heads`.
        top_k: int. Experts per token. Defaults to `4`.
        norm_top_k_prob: bool. Renormalize the kept router probabilities
            to sum to one (the presets do). Defaults to `False`.
        decoder_sparse_step: int. Block `i` is sparse when `i + 1` is a
            multiple of it (and `i` is not in `mlp_only_layers`). Defaults
            to `1`: every block.
        rope_max_wavelength: int or float. RoPE base. Defaults to `10000`.
        rope_scaling_factor: float. Positions are divided by it. Defaults
            to `1.0`.
        layer_norm_epsilon: float. Epsilon of the block and final RMS norms
            (the query/key norms use `1e-6`, like keras-hub). Defaults to
            `1e-6`.
        dropout: float. Dropout rate in training. Defaults to `0`.
        dtype: string or `keras.DTypePolicy`.
        tie_word_embeddings: bool. Whether the output projection reuses the
            token embedding. Defaults to `False`.
        sliding_window_size: int or `None`. If set, every layer attends only
            to the last `sliding_window_size` positions (the query's own
            included); `None` attends to the whole prefix. Defaults to
            `32768`, as in keras-hub; the presets use `None`.
        router_aux_loss_coefficient: float. Weight of each sparse block's
            load-balancing loss, added to `model.losses` in training.
            Defaults to `0.001`.
        mlp_only_layers: list of block indices whose feed-forward is dense,
            or `None` for none. Defaults to `None`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.qwen3_moe import Qwen3MoeBackbone

    model = Qwen3MoeBackbone(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        moe_intermediate_dim=16,
        num_experts=4,
        head_dim=16,
        top_k=2,
        norm_top_k_prob=True,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    ```
    """

    presets = QWEN3_MOE_PRESETS

    @staticmethod
    def _layout_rules(config):
        experts = sparse_moe_rules(
            BLOCK + MOE_BLOCK + "/", fused_gate_intermediate=True
        )
        # The query/key norm scales are (head_dim,): no rule. The presets'
        # 4 key/value heads do not divide an 8-way model axis: their
        # kernels then shard hidden over both axes rather than being
        # replicated (per-device parameters 1.026 -> 1.003 of the ideal
        # for the 30B on 1x8), for an all-reduce of the small key/value
        # projections.
        return llama_style_rules(
            tied=config.get("tie_word_embeddings", False),
            feedforward=mixed_feedforward_rules(
                config, BLOCK, experts, DENSE_BLOCK
            ),
            hidden_if_heads_indivisible=True,
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
        num_experts,
        head_dim: int | None = None,
        top_k=4,
        norm_top_k_prob=False,
        decoder_sparse_step=1,
        rope_max_wavelength=10000,
        rope_scaling_factor=1.0,
        layer_norm_epsilon=1e-6,
        dropout=0,
        dtype=None,
        tie_word_embeddings=False,
        sliding_window_size: int | None = 32768,
        router_aux_loss_coefficient=0.001,
        mlp_only_layers=None,
        **kwargs,
    ):
        feedforward = qwen_moe_feedforward(
            locals(), SparseMoE, MOE_BLOCK, DENSE_BLOCK
        )
        build_llama_style_from(
            self,
            locals(),
            attention_options=qwen3_attention_options(
                sliding_window_size, QUERY_KEY_NORM_EPSILON
            ),
            feedforward=feedforward,
        )
