"""Built-in DeepSeek-V3 preset configs (configs only: no weights are
bundled).

From the published `config.json` of deepseek-ai/DeepSeek-V3: 61 blocks,
the first 3 dense, then 256 routed experts (8 per token, in 8 groups of
which 4 are kept) and 1 shared expert; MLA with a 1536-wide query latent
and a 512-wide key/value latent; YaRN by 40 over 4096 positions. Its
multi-token-prediction block (`num_nextn_predict_layers: 1`) is left out:
670.8B parameters here (the published 671B; 685B with that block).
"""

DEEPSEEK_V3_PRESETS = {
    "deepseek_v3_671b": {
        "vocabulary_size": 129280,
        "num_layers": 61,
        "num_query_heads": 128,
        "hidden_dim": 7168,
        "intermediate_dim": 18432,
        "moe_intermediate_dim": 2048,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "n_group": 8,
        "topk_group": 4,
        "routed_scaling_factor": 2.5,
        "norm_topk_prob": True,
        "first_k_dense_replace": 3,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "rope_max_wavelength": 10000,
        "rope_scaling_factor": 40.0,
        "rope_original_max_position_embeddings": 4096,
        "rope_beta_fast": 32.0,
        "rope_beta_slow": 1.0,
        "rope_mscale": 1.0,
        "rope_mscale_all_dims": 1.0,
        "layer_norm_epsilon": 1e-6,
        "tie_word_embeddings": False,
    },
}
