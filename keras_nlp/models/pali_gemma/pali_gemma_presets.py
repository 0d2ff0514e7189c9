"""Built-in PaliGemma preset configs (configs only: no weights are bundled).

Every size pairs the SigLIP So400m vision tower (27 blocks of width 1152,
16 heads, MLP 4304, 14-pixel patches) with a Gemma decoder over a
257152-token vocabulary: Gemma 2B for PaliGemma 1 and Gemma 2 (2B, 9B,
27B) for PaliGemma 2. Each config reproduces the parameter count keras-hub
lists for the preset, except `pali_gemma2_*_28b_448` and `_896`, which
keras-hub lists with the 224 count (their position tables are 1024 and 4096
rows, not 256).
"""

_SIGLIP_SO400M = {
    "vit_patch_size": 14,
    "vit_num_heads": 16,
    "vit_hidden_dim": 1152,
    "vit_num_layers": 27,
    "vit_intermediate_dim": 4304,
}


def _pali_gemma(image_size):
    """PaliGemma 1: Gemma 2B (8 query heads, one key/value head)."""
    return {
        "vocabulary_size": 257152,
        "image_size": image_size,
        "num_layers": 18,
        "num_query_heads": 8,
        "num_key_value_heads": 1,
        "hidden_dim": 2048,
        "intermediate_dim": 32768,
        "head_dim": 256,
        **_SIGLIP_SO400M,
    }


# PaliGemma 2's decoders: Gemma 2 2B, 9B and 27B.
_GEMMA2_SIZES = {
    "3b": dict(
        num_layers=26,
        num_query_heads=8,
        num_key_value_heads=4,
        hidden_dim=2304,
        intermediate_dim=18432,
        head_dim=256,
    ),
    "10b": dict(
        num_layers=42,
        num_query_heads=16,
        num_key_value_heads=8,
        hidden_dim=3584,
        intermediate_dim=28672,
        head_dim=256,
    ),
    # Queries scaled by (4608 / 32) ** -0.5, not head_dim ** -0.5.
    "28b": dict(
        num_layers=46,
        num_query_heads=32,
        num_key_value_heads=16,
        hidden_dim=4608,
        intermediate_dim=73728,
        head_dim=128,
        query_head_dim_normalize=False,
    ),
}


def _pali_gemma2(size, image_size):
    """PaliGemma 2: Gemma 2's post-norms, soft caps and local windows."""
    return {
        "vocabulary_size": 257152,
        "image_size": image_size,
        "query_head_dim_normalize": True,
        **_GEMMA2_SIZES[size],
        **_SIGLIP_SO400M,
        "use_post_ffw_norm": True,
        "use_post_attention_norm": True,
        "attention_logit_soft_cap": 50.0,
        "final_logit_soft_cap": 30.0,
        "use_sliding_window_attention": True,
        "sliding_window_size": 4096,
    }


PALI_GEMMA_PRESETS = {
    "pali_gemma_3b_mix_224": _pali_gemma(224),
    "pali_gemma_3b_mix_448": _pali_gemma(448),
    "pali_gemma_3b_224": _pali_gemma(224),
    "pali_gemma_3b_448": _pali_gemma(448),
    "pali_gemma_3b_896": _pali_gemma(896),
    "pali_gemma_2_ft_docci_3b_448": _pali_gemma2("3b", 448),
    "pali_gemma2_ft_docci_10b_448": _pali_gemma2("10b", 448),
    **{
        f"pali_gemma2_{kind}_{size}_{image_size}": _pali_gemma2(
            size, image_size
        )
        for kind, sizes in (
            ("mix", ((size, s) for size in _GEMMA2_SIZES for s in (224, 448))),
            (
                "pt",
                ((size, s) for size in _GEMMA2_SIZES for s in (224, 448, 896)),
            ),
        )
        for size, image_size in sizes
    },
}
