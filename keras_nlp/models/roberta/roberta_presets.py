"""Built-in RoBERTa preset configs (configs only: no weights are bundled).

Facebook's English RoBERTa sizes in the keras-hub format: a 50265-token
byte-level BPE vocabulary, which is odd (no model axis divides it), 512
positions, no segments, 64-wide heads and a feed-forward four times the
hidden width.
"""


def _roberta(num_layers, num_heads, hidden_dim):
    return {
        "vocabulary_size": 50265,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "hidden_dim": hidden_dim,
        "intermediate_dim": 4 * hidden_dim,
        "dropout": 0.1,
        "max_sequence_length": 512,
    }


ROBERTA_PRESETS = {
    "roberta_base_en": _roberta(num_layers=12, num_heads=12, hidden_dim=768),
    "roberta_large_en": _roberta(num_layers=24, num_heads=16, hidden_dim=1024),
}
