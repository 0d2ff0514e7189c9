"""Built-in XLM-RoBERTa preset configs (configs only: no weights bundled).

RoBERTa's base and large sizes with a 250002-token multilingual
SentencePiece vocabulary, which divides only by 2: on a 4- or 8-way model
axis the token table shards its hidden dimension instead.
"""


def _xlm_roberta(num_layers, num_heads, hidden_dim):
    return {
        "vocabulary_size": 250002,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "hidden_dim": hidden_dim,
        "intermediate_dim": 4 * hidden_dim,
        "dropout": 0.1,
        "max_sequence_length": 512,
    }


XLM_ROBERTA_PRESETS = {
    "xlm_roberta_base_multi": _xlm_roberta(
        num_layers=12, num_heads=12, hidden_dim=768
    ),
    "xlm_roberta_large_multi": _xlm_roberta(
        num_layers=24, num_heads=16, hidden_dim=1024
    ),
}
