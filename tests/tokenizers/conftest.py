"""Session-wide tiny tokenizers (see `tiny_tokenizers`)."""

import itertools

import pytest

from tests.tokenizers import tiny_tokenizers


@pytest.fixture(scope="session")
def bpe_json():
    return tiny_tokenizers.train_bpe_json()


@pytest.fixture(scope="session")
def sentencepiece_model():
    return tiny_tokenizers.train_sentencepiece()


@pytest.fixture(scope="session")
def gemma_layout_model():
    return tiny_tokenizers.train_gemma_layout_model()


@pytest.fixture
def make_preset(tmp_path):
    """Writes {name: bytes or JSON-able dict} into a new directory."""
    counter = itertools.count()

    def make(files):
        return tiny_tokenizers.write_files(
            tmp_path / f"preset_{next(counter)}", files
        )

    return make
