"""Built-in ELECTRA preset configs (configs only: no weights are bundled).

Google's English ELECTRA discriminators in the keras-hub format: BERT's
30522-token uncased vocabulary (which divides only by 2), 512 positions,
two segments and 64-wide heads. Small's embeddings are half its hidden
width and projected up; base's are as wide as its hidden states.
"""

from keras_nlp.models.families.presets import preset_config


def _electra(num_heads, hidden_dim, embedding_dim):
    config = preset_config(
        12,
        num_heads,
        hidden_dim,
        vocabulary_size=30522,
        embedding_dim=embedding_dim,
        max_sequence_length=512,
        num_segments=2,
    )
    # keras-hub's ELECTRA calls its vocabulary size `vocab_size`.
    return {"vocab_size": config.pop("vocabulary_size"), **config}


ELECTRA_PRESETS = {
    "electra_small_discriminator_uncased_en": _electra(
        num_heads=4, hidden_dim=256, embedding_dim=128
    ),
    "electra_base_discriminator_uncased_en": _electra(
        num_heads=12, hidden_dim=768, embedding_dim=768
    ),
}
