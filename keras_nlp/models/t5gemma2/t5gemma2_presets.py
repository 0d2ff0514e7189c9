"""Built-in T5Gemma 2 preset configs, text only (configs only: no weights
are bundled).

keras-hub's `t5gemma2_270m_270m`, `t5gemma2_1b_1b` and `t5gemma2_4b_4b`:
each side is the Gemma 3 model of that size (published `config.json`):
five sliding layers then one full, RoPE bases 10,000 (sliding) and
1,000,000 (full, positions scaled by 8 in the 4B), queries scaled by
256 ** -0.5, no soft caps, two token tables of 262,144 rows. Their
parameters here are the text model's; keras-hub's published counts add
its vision tower (a 416,866,032-parameter SigLIP encoder and its
projection to the hidden width, and in the 4B two end-of-image
embeddings): 953,800,816, 2,417,966,192 and 8,180,020,080.
"""

_VOCABULARY = 262_144


def _layer_types(num_layers):
    return [
        "full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
        for i in range(num_layers)
    ]


def _preset(hidden, intermediate, layers, heads, kv_heads, window, factor):
    config = {"vocabulary_size": _VOCABULARY}
    for side in ("encoder", "decoder"):
        config.update(
            {
                f"{side}_hidden_dim": hidden,
                f"{side}_intermediate_dim": intermediate,
                f"{side}_num_layers": layers,
                f"{side}_num_attention_heads": heads,
                f"{side}_num_key_value_heads": kv_heads,
                f"{side}_head_dim": 256,
                f"{side}_layer_types": _layer_types(layers),
            }
        )
    config.update(
        {
            "dropout_rate": 0.0,
            "rms_norm_eps": 1e-6,
            "query_pre_attn_scalar": 256.0,
            "attention_bias": False,
            "hidden_activation": "gelu_approximate",
            "tie_word_embeddings": True,
            "initializer_range": 0.02,
            "attention_dropout": 0.0,
            "sliding_window": window,
            "cross_attention_hidden_size": hidden,
            "attn_logit_softcapping": None,
            "final_logit_softcapping": None,
            "rope_max_wavelength": 10000.0,
            "global_rope_scaling_factor": factor,
            "encoder_rope_max_wavelength": None,
            "encoder_global_rope_scaling_factor": None,
            "use_query_key_norm": True,
            "vision_encoder": None,
            "eoi_token_index": 256000,
        }
    )
    return config


T5GEMMA2_PRESETS = {
    "t5gemma2_270m_270m": _preset(640, 2048, 18, 4, 1, 512, 1.0),
    "t5gemma2_1b_1b": _preset(1152, 6912, 26, 4, 1, 512, 1.0),
    "t5gemma2_4b_4b": _preset(2560, 10240, 34, 8, 4, 1024, 8.0),
}
