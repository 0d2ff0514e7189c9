"""Built-in BERT preset configs (configs only: no weights are bundled).

Google's English BERT sizes in the keras-hub format: a 30522-token uncased
vocabulary (28996 cased), which divides only by 2, 512 positions, two
segments, 64-wide heads and a feed-forward four times the hidden width.
"""


def _bert(num_layers, num_heads, hidden_dim, vocabulary_size=30522):
    return {
        "vocabulary_size": vocabulary_size,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "hidden_dim": hidden_dim,
        "intermediate_dim": 4 * hidden_dim,
        "dropout": 0.1,
        "max_sequence_length": 512,
        "num_segments": 2,
    }


BERT_PRESETS = {
    "bert_tiny_en_uncased": _bert(num_layers=2, num_heads=2, hidden_dim=128),
    "bert_small_en_uncased": _bert(num_layers=4, num_heads=8, hidden_dim=512),
    "bert_medium_en_uncased": _bert(num_layers=8, num_heads=8, hidden_dim=512),
    "bert_base_en_uncased": _bert(num_layers=12, num_heads=12, hidden_dim=768),
    "bert_base_en": _bert(
        num_layers=12, num_heads=12, hidden_dim=768, vocabulary_size=28996
    ),
    "bert_large_en_uncased": _bert(
        num_layers=24, num_heads=16, hidden_dim=1024
    ),
}
