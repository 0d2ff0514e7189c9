"""Built-in ELECTRA preset configs (configs only: no weights are bundled).

Google's English ELECTRA discriminators in the keras-hub format: BERT's
30522-token uncased vocabulary (which divides only by 2), 512 positions,
two segments and 64-wide heads. Small's embeddings are half its hidden
width and projected up; base's are as wide as its hidden states.
"""


def _electra(num_heads, hidden_dim, embedding_dim):
    return {
        "vocab_size": 30522,
        "num_layers": 12,
        "num_heads": num_heads,
        "hidden_dim": hidden_dim,
        "embedding_dim": embedding_dim,
        "intermediate_dim": 4 * hidden_dim,
        "dropout": 0.1,
        "max_sequence_length": 512,
        "num_segments": 2,
    }


ELECTRA_PRESETS = {
    "electra_small_discriminator_uncased_en": _electra(
        num_heads=4, hidden_dim=256, embedding_dim=128
    ),
    "electra_base_discriminator_uncased_en": _electra(
        num_heads=12, hidden_dim=768, embedding_dim=768
    ),
}
