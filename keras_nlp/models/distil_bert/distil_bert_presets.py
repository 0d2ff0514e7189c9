"""Built-in DistilBERT preset configs (configs only: no weights bundled).

BERT-base distilled to 6 blocks in the keras-hub format: BERT's 30522-token
uncased vocabulary, which divides only by 2, 512 positions, no segments,
12 heads of 64 and a 3072-wide feed-forward.
"""

DISTIL_BERT_PRESETS = {
    "distil_bert_base_en_uncased": {
        "vocabulary_size": 30522,
        "num_layers": 6,
        "num_heads": 12,
        "hidden_dim": 768,
        "intermediate_dim": 3072,
        "dropout": 0.1,
        "max_sequence_length": 512,
    },
}
