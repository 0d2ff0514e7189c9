"""ALBERT's config: the layers run group by group."""

import pytest

from keras_nlp.models.albert.albert_backbone import AlbertBackbone


def test_num_layers_must_be_a_multiple_of_num_groups():
    with pytest.raises(ValueError, match="num_layers=3, num_groups=2"):
        AlbertBackbone(
            vocabulary_size=96,
            num_layers=3,
            num_heads=2,
            embedding_dim=8,
            hidden_dim=16,
            intermediate_dim=32,
            num_groups=2,
        )
