"""DeepSeek-V3 decoder backbone: multi-head latent attention and a
sigmoid-routed mixture of 1 shared and many routed experts."""

import keras

from keras_nlp.distribution.dims import einsum_dims
from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import MODEL
from keras_nlp.layers.common import check_positive_ints
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.layers.layout_rules import sparse_moe_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.layers.rotary_embedding import RotaryEmbedding
from keras_nlp.layers.sparse_moe import DEFAULT_SUBLAYER_NAMES as MOE_NAMES
from keras_nlp.layers.sparse_moe import ROUTER_DIMS
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.deepseek_v3.deepseek_v3_layers import EQUATIONS
from keras_nlp.models.deepseek_v3.deepseek_v3_layers import LEGEND
from keras_nlp.models.deepseek_v3.deepseek_v3_layers import SHARED_EXPERT
from keras_nlp.models.deepseek_v3.deepseek_v3_layers import SUBLAYER_NAMES
from keras_nlp.models.deepseek_v3.deepseek_v3_layers import DeepSeekV3MoE
from keras_nlp.models.deepseek_v3.deepseek_v3_layers import (
    DeepSeekV3RotaryEmbedding,
)
from keras_nlp.models.deepseek_v3.deepseek_v3_layers import (
    MultiHeadLatentAttention,
)
from keras_nlp.models.deepseek_v3.deepseek_v3_layers import softmax_scale
from keras_nlp.models.deepseek_v3.deepseek_v3_presets import DEEPSEEK_V3_PRESETS
from keras_nlp.models.families.llama import BLOCK
from keras_nlp.models.families.llama import build_decoder_stack

ATTENTION = BLOCK + "self_attention/"
MOE_BLOCK = "sparse_moe_block"


def _kernel_rule(kind, *roles):
    name = SUBLAYER_NAMES[kind]
    dims = einsum_dims(EQUATIONS[kind], LEGEND)
    return named_rule(ATTENTION + name + "/kernel", dims, *roles)


def is_moe_layer(index, first_k_dense_replace):
    """Whether block `index` has the mixture (the first
    `first_k_dense_replace` blocks have a dense SwiGLU)."""
    return index >= first_k_dense_replace


class DeepSeekV3Backbone(Backbone):
    """DeepSeek-V3 decoder mapping token ids to final-normalized states.

    Pre-norm RMSNorm blocks of multi-head latent attention (MLA) and a
    feed-forward, then a final RMSNorm; the output projection is untied
    by default.

    - MLA: queries from a low-rank path `x -> query_a (q_lora_rank) ->
      RMSNorm -> query_b` (a plain `query` when `q_lora_rank` is `None`,
      as in DeepSeek-V2-Lite); keys and values from one compressed latent
      `x -> key_value_a (kv_lora_rank + qk_rope_head_dim)`, whose first
      `kv_lora_rank` features are RMS-normalized and expanded by
      `key_value_b` into each head's `qk_nope_head_dim` key part and
      `v_head_dim` value, and whose last `qk_rope_head_dim` features are
      one RoPE key shared by every head. RoPE (YaRN when
      `rope_scaling_factor > 1`) rotates adjacent feature pairs of the
      query's and the shared key's RoPE parts. Logits are scaled by
      `1 / sqrt(qk_nope_head_dim + qk_rope_head_dim)`, times
      `(0.1 * rope_mscale_all_dims * ln(factor) + 1) ** 2` with YaRN.
    - Feed-forward: a dense SwiGLU of `intermediate_dim` in the first
      `first_k_dense_replace` blocks; after them `DeepSeekV3MoE`:
      `n_routed_experts` SwiGLU experts of `moe_intermediate_dim` routed
      by sigmoid scores, group-limited (`n_group`, `topk_group`) on the
      scores plus a non-trainable `e_score_correction_bias`, weighted by
      the unbiased scores (normalized if `norm_topk_prob`) times
      `routed_scaling_factor`; plus `n_shared_experts` shared experts as
      one SwiGLU of `n_shared_experts * moe_intermediate_dim`.

    The cache of cached decoding holds each position's normalized latent
    and rotated RoPE key (`kv_lora_rank + qk_rope_head_dim` numbers), not
    per-head keys and values; each step expands it through `key_value_b`.

    Differences from the published model: no multi-token-prediction
    block (`num_nextn_predict_layers`), no training-time balance loss;
    `num_key_value_heads` of the Hugging Face config is not an argument
    (MLA gives every head its own key and value); experts of dropped
    groups are never chosen (DeepSeek's own code), where `transformers`
    zeroes their biased scores instead (the same unless those are
    negative).

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_query_heads: int. Attention heads.
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of the dense blocks' SwiGLU.
        moe_intermediate_dim: int. Width of each routed expert.
        n_routed_experts: int. Routed experts per mixture.
        n_shared_experts: int. Shared experts per mixture.
        num_experts_per_tok: int. Routed experts per token.
        n_group: int. Expert groups. Defaults to `1`.
        topk_group: int. Groups kept per token. Defaults to `1`.
        routed_scaling_factor: float. Factor on the routed weights.
            Defaults to `1.0`.
        norm_topk_prob: bool. Normalize the chosen weights to sum to one.
            Defaults to `True`.
        first_k_dense_replace: int. Leading blocks with a dense SwiGLU.
            Defaults to `0`.
        q_lora_rank: int or `None`. Query latent width; `None` for a plain
            query projection. Defaults to `None`.
        kv_lora_rank: int. Key/value latent width. Defaults to `512`.
        qk_nope_head_dim: int. Per-head query/key features without RoPE.
            Defaults to `128`.
        qk_rope_head_dim: int. Query/key features with RoPE (even).
            Defaults to `64`.
        v_head_dim: int. Per-head value width. Defaults to `128`.
        rope_max_wavelength: int or float. RoPE base. Defaults to `10000`.
        rope_scaling_factor: float. YaRN's factor; `1` is plain RoPE.
            Defaults to `1.0`.
        rope_original_max_position_embeddings: int. YaRN's pretraining
            context. Defaults to `4096`.
        rope_beta_fast: float. YaRN's `beta_fast`. Defaults to `32.0`.
        rope_beta_slow: float. YaRN's `beta_slow`. Defaults to `1.0`.
        rope_mscale: float. YaRN's `mscale`. Defaults to `1.0`.
        rope_mscale_all_dims: float. YaRN's `mscale_all_dim` (a float,
            not a size, hence the plural). Defaults to
            `0.0`.
        layer_norm_epsilon: float. Epsilon of every RMS norm. Defaults to
            `1e-6`.
        tie_word_embeddings: bool. Output projection reuses the token
            embedding. Defaults to `False`.
        dropout: float. Dropout on each block's attention and feed-forward
            outputs in training (`attention_dropout` of the Hugging Face
            config, 0 in the published ones). Defaults to `0`.
        dtype: string or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.deepseek_v3 import DeepSeekV3Backbone

    model = DeepSeekV3Backbone(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=4,
        hidden_dim=32,
        intermediate_dim=64,
        moe_intermediate_dim=16,
        n_routed_experts=8,
        n_shared_experts=1,
        num_experts_per_tok=2,
        n_group=4,
        topk_group=2,
        first_k_dense_replace=1,
        q_lora_rank=24,
        kv_lora_rank=16,
        qk_nope_head_dim=8,
        qk_rope_head_dim=4,
        v_head_dim=8,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    ```
    """

    presets = DEEPSEEK_V3_PRESETS
    # The query's and the values' projections to heads; a config without
    # a query latent (`q_lora_rank=None`) names `("query", "key_value_b")`.
    lora_target_names = ("query_b", "key_value_b")

    @staticmethod
    def _layout_rules(config):
        # Heads on the model axis for query_b (or query), key_value_b and
        # the output; their latent (or hidden) inputs FSDP on the data
        # axis. The A projections and latent norms have no heads: the
        # latent is shared by every head, and the norm and the B
        # projections read all of it, so splitting the latent would need a
        # gather per block. Their hidden (contracted) dimension is split
        # over both axes instead: 1/devices of their bytes, for an
        # all-reduce of the small (tokens, latent) output. The norm scales
        # (latent,) and the router's bias (experts,) are replicated.
        heads = {"heads": MODEL, "hidden": DATA}
        latent_heads = {"heads": MODEL, "query_latent": DATA}
        latent_heads_kv = {"heads": MODEL, "key_value_latent": DATA}
        spread = {"hidden": (DATA, MODEL)}
        rules = list(
            token_embedding_rules(
                "token_embedding/",
                tied=config.get("tie_word_embeddings", False),
            )
        )
        if config.get("q_lora_rank") is None:
            rules.append(_kernel_rule("query", heads, spread))
        else:
            rules += [
                _kernel_rule("query_a", spread),
                _kernel_rule(
                    "query_b", latent_heads, {"query_latent": (DATA, MODEL)}
                ),
            ]
        rules += [
            _kernel_rule("key_value_a", spread),
            _kernel_rule(
                "key_value_b",
                latent_heads_kv,
                {"key_value_latent": (DATA, MODEL)},
            ),
            _kernel_rule("output", heads, spread),
        ]
        dense = config.get("first_k_dense_replace", 0)
        if dense > 0:
            rules += feedforward_rules(BLOCK)
        if config["num_layers"] > dense:
            moe = BLOCK + MOE_BLOCK + "/"
            # Routed experts on the expert axis (the model axis without
            # one), the shared expert like a dense SwiGLU.
            # 256 experts make the router (hidden, experts) 106M
            # parameters over the 58 mixtures, 4% of each device's bytes
            # on 256 devices if replicated as the other MoEs' routers are:
            # its hidden goes FSDP-style on the data axes instead.
            router = moe + MOE_NAMES["router"] + "/kernel"
            rules += [
                rule for rule in sparse_moe_rules(moe) if rule[0] != router
            ]
            rules.append(named_rule(router, ROUTER_DIMS, {"hidden": DATA}))
            rules += feedforward_rules(moe + SHARED_EXPERT + "/")
        return rules

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_query_heads,
        hidden_dim,
        intermediate_dim,
        moe_intermediate_dim,
        n_routed_experts,
        n_shared_experts,
        num_experts_per_tok,
        n_group=1,
        topk_group=1,
        routed_scaling_factor=1.0,
        norm_topk_prob=True,
        first_k_dense_replace=0,
        q_lora_rank: int | None = None,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        rope_max_wavelength=10000,
        rope_scaling_factor=1.0,
        rope_original_max_position_embeddings=4096,
        rope_beta_fast=32.0,
        rope_beta_slow=1.0,
        rope_mscale=1.0,
        rope_mscale_all_dims=0.0,
        layer_norm_epsilon=1e-6,
        tie_word_embeddings=False,
        dropout=0.0,
        dtype=None,
        **kwargs,
    ):
        # Sizes the shared check does not recognize by name.
        check_positive_ints(
            n_routed_experts=n_routed_experts,
            n_shared_experts=n_shared_experts,
            kv_lora_rank=kv_lora_rank,
        )
        if q_lora_rank is not None:
            check_positive_ints(q_lora_rank=q_lora_rank)
        if (
            not isinstance(first_k_dense_replace, int)
            or isinstance(first_k_dense_replace, bool)
            or not 0 <= first_k_dense_replace <= num_layers
        ):
            raise ValueError(
                "`first_k_dense_replace` counts the leading dense blocks: "
                f"an integer in [0, num_layers] = [0, {num_layers}]. "
                f"Received: first_k_dense_replace={first_k_dense_replace!r}."
            )
        if qk_rope_head_dim % 2:
            raise ValueError(
                "RoPE rotates pairs of features, so `qk_rope_head_dim` must "
                f"be even. Received: qk_rope_head_dim={qk_rope_head_dim}."
            )
        initializer = keras.initializers.RandomNormal(stddev=0.02)
        scale = softmax_scale(
            qk_nope_head_dim + qk_rope_head_dim,
            rope_scaling_factor,
            rope_mscale_all_dims,
        )

        def rotary_embedding():
            if rope_scaling_factor == 1:
                return RotaryEmbedding(
                    max_wavelength=rope_max_wavelength,
                    dtype=dtype,
                    name="rotary_embedding",
                )
            return DeepSeekV3RotaryEmbedding(
                max_wavelength=rope_max_wavelength,
                factor=rope_scaling_factor,
                original_max_position_embeddings=(
                    rope_original_max_position_embeddings
                ),
                beta_fast=rope_beta_fast,
                beta_slow=rope_beta_slow,
                mscale=rope_mscale,
                mscale_all_dim=rope_mscale_all_dims,
                dtype=dtype,
                name="rotary_embedding",
            )

        # One RoPE (it has no weights) for every block: 61 layers fewer to
        # construct when the 671B config is planned.
        rope = rotary_embedding()

        def attention(index):
            return MultiHeadLatentAttention(
                num_heads=num_query_heads,
                q_lora_rank=q_lora_rank,
                kv_lora_rank=kv_lora_rank,
                qk_nope_head_dim=qk_nope_head_dim,
                qk_rope_head_dim=qk_rope_head_dim,
                v_head_dim=v_head_dim,
                rotary_embedding=rope,
                query_scale=scale,
                layer_norm_epsilon=layer_norm_epsilon,
                kernel_initializer=initializer,
                dtype=dtype,
                name="self_attention",
            )

        def feedforward(index):
            if not is_moe_layer(index, first_k_dense_replace):
                return None
            return DeepSeekV3MoE(
                num_experts=n_routed_experts,
                intermediate_dim=moe_intermediate_dim,
                shared_intermediate_dim=(
                    moe_intermediate_dim * n_shared_experts
                ),
                n_group=n_group,
                topk_group=topk_group,
                routed_scaling_factor=routed_scaling_factor,
                top_k=num_experts_per_tok,
                normalize_top_k=norm_topk_prob,
                kernel_initializer=initializer,
                dtype=dtype,
                name=MOE_BLOCK,
            )

        build_decoder_stack(
            self,
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            hidden_dim=hidden_dim,
            attention=attention,
            intermediate_dim=intermediate_dim,
            feedforward=feedforward,
            layer_norm_epsilon=layer_norm_epsilon,
            dropout=dropout,
            tie_word_embeddings=tie_word_embeddings,
            kernel_initializer=initializer,
            dtype=dtype,
            **kwargs,
        )
