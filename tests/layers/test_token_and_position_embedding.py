import keras
import numpy as np
import pytest
from keras import ops

from keras_nlp.layers.token_and_position_embedding import PositionEmbedding
from keras_nlp.layers.token_and_position_embedding import (
    TokenAndPositionEmbedding,
)


def test_position_embedding_rows_and_start_index():
    layer = PositionEmbedding(sequence_length=10, name="positions")
    inputs = np.zeros((2, 4, 6), "float32")
    outputs = ops.convert_to_numpy(layer(inputs))
    table = ops.convert_to_numpy(layer.embeddings)
    assert layer.embeddings.path == "positions/embeddings"
    assert table.shape == (10, 6)
    assert outputs.shape == (2, 4, 6)
    np.testing.assert_array_equal(outputs[0], table[:4])
    np.testing.assert_array_equal(outputs[1], table[:4])
    shifted = ops.convert_to_numpy(layer(inputs[:, :1], start_index=7))
    np.testing.assert_array_equal(shifted[:, 0], np.stack([table[7]] * 2))


def test_position_embedding_reads_only_the_shape():
    layer = PositionEmbedding(sequence_length=5)
    a = layer(np.zeros((1, 3, 4), "float32"))
    b = layer(np.random.rand(1, 3, 4).astype("float32"))
    np.testing.assert_array_equal(
        ops.convert_to_numpy(a), ops.convert_to_numpy(b)
    )


def test_position_embedding_config_and_dtype():
    layer = PositionEmbedding(
        sequence_length=8,
        initializer=keras.initializers.RandomNormal(stddev=0.5),
        dtype="bfloat16",
    )
    config = layer.get_config()
    clone = PositionEmbedding.from_config(config)
    assert clone.get_config() == config
    outputs = layer(np.zeros((1, 3, 4), "float32"))
    assert keras.backend.standardize_dtype(outputs.dtype) == "bfloat16"


@pytest.mark.parametrize("sequence_length", [0, 2.5, None, True])
def test_position_embedding_rejects_bad_lengths(sequence_length):
    with pytest.raises(ValueError) as error:
        PositionEmbedding(sequence_length=sequence_length)
    assert f"sequence_length={sequence_length!r}" in str(error.value)
    assert "positive integer" in str(error.value)


def test_token_and_position_embedding_paths_and_sum():
    layer = TokenAndPositionEmbedding(
        vocabulary_size=20,
        sequence_length=8,
        embedding_dim=6,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=1.0),
        name="embeddings",
    )
    token_ids = np.array([[3, 1, 4], [1, 5, 9]], "int32")
    outputs = ops.convert_to_numpy(layer(token_ids))
    paths = {v.path: tuple(v.shape) for v in layer.weights}
    assert paths == {
        "embeddings/token_embedding/embeddings": (20, 6),
        "embeddings/position_embedding/embeddings": (8, 6),
    }
    tokens = ops.convert_to_numpy(layer.token_embedding.embeddings)
    positions = ops.convert_to_numpy(layer.position_embedding.embeddings)
    np.testing.assert_allclose(
        outputs, tokens[token_ids] + positions[None, :3], atol=1e-6
    )
    # The two tables are drawn independently.
    assert not np.allclose(tokens[:8], positions)
    # Tied: the reverse projection reuses the token table.
    logits = ops.convert_to_numpy(
        layer.token_embedding(ops.convert_to_tensor(outputs), reverse=True)
    )
    np.testing.assert_allclose(logits, outputs @ tokens.T, atol=1e-5)


def test_token_and_position_embedding_start_index_and_config():
    layer = TokenAndPositionEmbedding(
        vocabulary_size=20, sequence_length=8, embedding_dim=6
    )
    full = ops.convert_to_numpy(layer(np.array([[3, 1, 4]], "int32")))
    step = ops.convert_to_numpy(layer(np.array([[4]], "int32"), start_index=2))
    np.testing.assert_allclose(step[:, 0], full[:, 2], atol=1e-6)

    config = layer.get_config()
    clone = TokenAndPositionEmbedding.from_config(config)
    assert clone.get_config() == config

    untied = TokenAndPositionEmbedding(
        vocabulary_size=20,
        sequence_length=8,
        embedding_dim=6,
        tie_weights=False,
    )
    untied.build((None, None))
    assert "reverse_embeddings" in [
        v.path.rsplit("/", 1)[-1] for v in untied.weights
    ]
