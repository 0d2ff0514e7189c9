"""Built-in T5Gemma preset configs (configs only: no weights are bundled).

keras-hub publishes each size four times (`_ul2`, `_prefixlm` and their
instruction-tuned `_it`), one architecture under four trainings; the
`_ul2` name of each size is here. The shapes reproduce keras-hub's
published parameter counts exactly (two untied token tables of 256,000
rows, one per side); the other fields are those of Gemma 2's published
configs, which T5Gemma's `config.json` files repeat: sliding and full
attention alternating (sliding first) with a 4,096 window, attention and
final logit soft caps 50 and 30, queries scaled by the head size, RoPE
base 10,000; for the T5-sized `s` to `xl` (heads of 64) these options are
taken to be the 2B's too, as no published config was at hand to confirm
them. keras-hub's `ml_ml` size is left out: no shapes found here
reproduce its published count.
"""

_VOCABULARY = 256_000


def _layer_types(num_layers):
    return ["sliding_attention", "full_attention"] * (num_layers // 2) + [
        "sliding_attention"
    ] * (num_layers % 2)


def _side(prefix, hidden, intermediate, layers, heads, kv_heads, head_dim):
    return {
        f"{prefix}_hidden_dim": hidden,
        f"{prefix}_intermediate_dim": intermediate,
        f"{prefix}_num_layers": layers,
        f"{prefix}_num_attention_heads": heads,
        f"{prefix}_num_key_value_heads": kv_heads,
        f"{prefix}_head_dim": head_dim,
        f"{prefix}_layer_types": _layer_types(layers),
    }


# Gemma 2 sizes (hidden, intermediate, layers, heads, kv heads, head dim).
_SIZES = {
    "s": (512, 1024, 8, 8, 8, 64),
    "b": (768, 2048, 12, 12, 12, 64),
    "l": (1024, 2816, 24, 16, 16, 64),
    "xl": (2048, 5120, 24, 32, 32, 64),
    "2b": (2304, 9216, 26, 8, 4, 256),
    "9b": (3584, 14336, 42, 16, 8, 256),
}


def _preset(encoder, decoder):
    config = {
        "vocabulary_size": _VOCABULARY,
        **_side("encoder", *_SIZES[encoder]),
        **_side("decoder", *_SIZES[decoder]),
        "dropout_rate": 0.0,
        "rms_norm_eps": 1e-6,
        # The head size, which is the decoder's and encoder's alike.
        "query_pre_attn_scalar": float(_SIZES[decoder][5]),
        "attention_bias": False,
        "hidden_activation": "gelu_approximate",
        "tie_word_embeddings": True,
        "initializer_range": 0.02,
        "attention_dropout": 0.0,
        "sliding_window": 4096,
        "cross_attention_hidden_size": _SIZES[encoder][0],
        "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0,
        "rope_max_wavelength": 10000.0,
    }
    return config


T5GEMMA_PRESETS = {
    f"t5gemma_{encoder}_{decoder}_ul2": _preset(encoder, decoder)
    for encoder, decoder in (
        ("s", "s"),
        ("b", "b"),
        ("l", "l"),
        ("xl", "xl"),
        ("2b", "2b"),
        ("9b", "2b"),
        ("9b", "9b"),
    )
}
