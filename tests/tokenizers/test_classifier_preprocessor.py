"""`ClassifierPreprocessor` lays texts out as the tokenizer's own
post-processor does (keras-hub's packing and truncation are compared in
tests/models/test_text_classifier.py)."""

import numpy as np
import pytest

from keras_nlp.tokenizers import ClassifierPreprocessor
from keras_nlp.tokenizers import Tokenizer
from keras_nlp.tokenizers.classifier_preprocessor import kept_lengths

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "<s>", "</s>", "a", "cat", "sat"]
IDS = {word: index for index, word in enumerate(WORDS)}
FIRSTS = ["a cat sat", "cat"]
SECONDS = ["sat", "a a cat"]


def tokenizer_with(post_processor):
    """`(ours, the tokenizers library's)` on a WordPiece vocabulary."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models
    from tokenizers import pre_tokenizers

    hf = HFTokenizer(models.WordPiece(IDS, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.post_processor = post_processor
    return Tokenizer({"tokenizer.json": hf.to_str().encode("utf-8")}), hf


def post_processors():
    from tokenizers import processors

    roberta = processors.RobertaProcessing(
        ("</s>", IDS["</s>"]), ("<s>", IDS["<s>"])
    )
    return {
        "bert": processors.BertProcessing(
            ("[SEP]", IDS["[SEP]"]), ("[CLS]", IDS["[CLS]"])
        ),
        "roberta": roberta,
        "sequence": processors.Sequence([processors.ByteLevel(), roberta]),
    }


@pytest.mark.parametrize("kind", ["bert", "roberta", "sequence"])
def test_layout_is_the_post_processors(kind):
    tokenizer, hf = tokenizer_with(post_processors()[kind])
    width = 12
    preprocessor = ClassifierPreprocessor(tokenizer, sequence_length=width)
    for columns in ((FIRSTS,), (FIRSTS, SECONDS)):
        packed = preprocessor(columns)
        for row, texts in enumerate(zip(*columns, strict=True)):
            expected = hf.encode(*texts)
            length = len(expected.ids)
            assert packed["token_ids"][row, :length].tolist() == expected.ids
            assert packed["segment_ids"][row, :length].tolist() == (
                expected.type_ids
            )
            assert packed["padding_mask"][row].tolist() == (
                [1] * length + [0] * (width - length)
            )
            assert (packed["token_ids"][row, length:] == 0).all()


def test_truncation_modes():
    assert kept_lengths([5, 4], 5, "round_robin") == [3, 2]
    assert kept_lengths([1, 6], 5, "round_robin") == [1, 4]
    assert kept_lengths([5, 4], 5, "waterfall") == [5, 0]
    assert kept_lengths([2, 6], 5, "waterfall") == [2, 3]
    assert kept_lengths([2, 2], 5, "waterfall") == [2, 2]


def test_labels_pass_through_and_errors_name_the_value():
    tokenizer, _ = tokenizer_with(post_processors()["bert"])
    # Room for the single text's [CLS] and [SEP] only.
    preprocessor = ClassifierPreprocessor(tokenizer, sequence_length=2)
    labels = np.array([1, 0])
    x, y, weights = preprocessor(FIRSTS, labels, np.ones(2))
    assert y is labels and x["token_ids"].tolist() == [[2, 3]] * 2
    assert ClassifierPreprocessor.from_config(
        preprocessor.get_config(), tokenizer
    ).get_config() == {"sequence_length": 2, "truncate": "round_robin"}
    with pytest.raises(
        ValueError, match="=2 leaves no room.*3 special tokens to a pair"
    ):
        preprocessor((FIRSTS, SECONDS))
    with pytest.raises(ValueError, match="sequence_length=0"):
        ClassifierPreprocessor(tokenizer, sequence_length=0)
    plain, _ = tokenizer_with(None)
    with pytest.raises(ValueError, match="names no layout of special"):
        ClassifierPreprocessor(plain)
