"""Built-in T5 preset configs (configs only: no weights are bundled).

Google's T5 in the keras-hub format: a 32128-token SentencePiece vocabulary
(128 * 251), 64-wide heads, as many decoder layers as encoder layers. The
original T5 has a ReLU feed-forward four times the hidden width and a tied
embedding; T5 1.1 and Flan-T5 have a gated GELU feed-forward and (mostly)
an untied output projection.

Each config reproduces keras-hub's parameter count for its preset. That
count says `t5_1.1_small` and `t5_1.1_large` are tied, though keras-hub's
conversion script unties every T5 1.1; with the count we follow the files.
"""


def _t5(
    num_layers,
    num_heads,
    hidden_dim,
    intermediate_dim,
    gated,
    tied,
    key_value_dim=None,
):
    return {
        "vocabulary_size": 32128,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "hidden_dim": hidden_dim,
        "intermediate_dim": intermediate_dim,
        "key_value_dim": key_value_dim,
        "dropout": 0.1,
        "activation": "gelu" if gated else "relu",
        "use_gated_activation": gated,
        "layer_norm_epsilon": 1e-6,
        "tie_embedding_weights": tied,
    }


def _flan(num_layers, num_heads, hidden_dim, intermediate_dim, tied=False):
    # T5 1.1 and Flan-T5 share their shapes; the small size has 6 heads of
    # 64 on a 512-wide stream.
    return _t5(
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        gated=True,
        tied=tied,
        key_value_dim=64,
    )


T5_PRESETS = {
    "t5_small_multi": _t5(6, 8, 512, 2048, False, True, key_value_dim=64),
    "t5_base_multi": _t5(12, 12, 768, 3072, False, True),
    "t5_large_multi": _t5(24, 16, 1024, 4096, False, True),
    "t5_1.1_small": _flan(8, 6, 512, 1024, tied=True),
    "t5_1.1_base": _flan(12, 12, 768, 2048),
    "t5_1.1_large": _flan(24, 16, 1024, 2816, tied=True),
    "t5_1.1_xl": _flan(24, 32, 2048, 5120),
    "t5_1.1_xxl": _flan(24, 64, 4096, 10240),
    "flan_small_multi": _flan(8, 6, 512, 1024),
    "flan_base_multi": _flan(12, 12, 768, 2048),
    "flan_large_multi": _flan(24, 16, 1024, 2816),
}
