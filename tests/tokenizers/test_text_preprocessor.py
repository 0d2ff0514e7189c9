"""`TextPreprocessor`: left-padded prompts, right-padded training text."""

import numpy as np
import pytest

from keras_nlp.tokenizers import TextPreprocessor
from keras_nlp.tokenizers import Tokenizer
from tests.tokenizers.tiny_tokenizers import PLAIN


@pytest.fixture(scope="module")
def tokenizer(sentencepiece_model):
    # PAD is its own token (not EOS), so padding and EOS differ in the
    # layouts below.
    return Tokenizer(
        {
            "tokenizer.model": sentencepiece_model,
            "tokenizer_config.json": b'{"pad_token": "<unk>"}',
        }
    )


def test_prompts_are_left_padded(tokenizer):
    assert tokenizer.pad_token_id not in (
        tokenizer.bos_token_id,
        *tokenizer.eos_token_ids,
    )
    batch = TextPreprocessor(tokenizer)(PLAIN)
    ids = tokenizer.encode(PLAIN)
    length = max(len(row) for row in ids)
    assert batch["token_ids"].dtype == np.int32
    assert batch["padding_mask"].dtype == np.int32
    assert batch["token_ids"].shape == (3, length)
    for row, row_ids in enumerate(ids):
        pad = length - len(row_ids)
        expected = [tokenizer.pad_token_id] * pad + row_ids
        assert batch["token_ids"][row].tolist() == expected
        assert batch["padding_mask"][row].tolist() == [0] * pad + [1] * len(
            row_ids
        )
    # Every prompt ends at the last position, BOS first.
    starts = length - batch["padding_mask"].sum(axis=1)
    assert (
        batch["token_ids"][np.arange(3), starts].tolist()
        == [tokenizer.bos_token_id] * 3
    )


def test_sequence_length_fixes_the_width_and_one_string_is_a_batch(tokenizer):
    batch = TextPreprocessor(tokenizer, sequence_length=40)(PLAIN[2])
    ids = tokenizer.encode(PLAIN[2])
    assert batch["token_ids"].shape == (1, 40)
    assert batch["token_ids"][0, 40 - len(ids) :].tolist() == ids
    assert (batch["token_ids"][0, : 40 - len(ids)] == 0).all()
    assert batch["padding_mask"].sum() == len(ids)


def test_a_too_long_prompt_is_named_not_truncated(tokenizer):
    lengths = [len(row) for row in tokenizer.encode(PLAIN)]
    limit = lengths[1] - 1
    with pytest.raises(ValueError) as error:
        TextPreprocessor(tokenizer, sequence_length=limit)(PLAIN)
    assert str(error.value) == (
        f"Prompt 0 is {lengths[0]} tokens long, longer than "
        f"sequence_length={limit} (1 more are too). Shorten it or pass a "
        "larger sequence_length; text is never truncated."
    )


def test_a_prompt_without_tokens_is_refused(sentencepiece_model):
    # No BOS: an empty prompt has nothing to continue from.
    no_bos = Tokenizer(
        {
            "tokenizer.model": sentencepiece_model,
            "tokenizer_config.json": b'{"add_bos_token": false}',
        }
    )
    preprocessor = TextPreprocessor(no_bos)
    with pytest.raises(ValueError, match="Prompt 1 encodes to no token"):
        preprocessor(["fine", ""])


def test_training_text_is_right_padded_with_eos(tokenizer):
    (eos,) = tokenizer.eos_token_ids
    batch = TextPreprocessor(tokenizer).for_training(PLAIN, 30)
    assert batch["token_ids"].shape == (3, 30)
    assert batch["token_ids"].dtype == np.int32
    for row, row_ids in enumerate(tokenizer.encode(PLAIN)):
        used = len(row_ids) + 1
        expected = [*row_ids, eos] + [tokenizer.pad_token_id] * (30 - used)
        assert batch["token_ids"][row].tolist() == expected
        assert batch["padding_mask"][row].tolist() == [1] * used + [0] * (
            30 - used
        )
    # The EOS counts towards the length.
    fits = len(tokenizer.encode(PLAIN[2])) + 1
    with pytest.raises(ValueError, match=f"Text 0 is {fits} tokens long"):
        TextPreprocessor(tokenizer).for_training(PLAIN[2], fits - 1)


def test_training_text_gets_one_eos(sentencepiece_model, bpe_json):
    # The tokenizer adds EOS itself: not a second one.
    adds_eos = Tokenizer(
        {
            "tokenizer.model": sentencepiece_model,
            "tokenizer_config.json": b'{"add_eos_token": true}',
        }
    )
    ids = adds_eos.encode(PLAIN[2])
    batch = TextPreprocessor(adds_eos).for_training(PLAIN[2], len(ids))
    assert batch["token_ids"][0].tolist() == ids
    # A tokenizer without EOS appends nothing.
    no_eos = Tokenizer({"tokenizer.json": bpe_json})
    ids = no_eos.encode(PLAIN[2])
    batch = TextPreprocessor(no_eos).for_training(PLAIN[2], len(ids) + 1)
    assert batch["token_ids"][0].tolist() == [*ids, 0]
    assert batch["padding_mask"][0].tolist() == [1] * len(ids) + [0]


def test_decode_drops_padding_and_special_tokens(tokenizer):
    preprocessor = TextPreprocessor(tokenizer)
    batch = preprocessor(PLAIN)
    assert preprocessor.decode(**batch) == PLAIN
    # Without a mask, padding runs at either end are dropped: a generated
    # continuation (here EOS and more padding) follows each prompt.
    (eos,) = tokenizer.eos_token_ids
    width = batch["token_ids"].shape[1]
    generated = np.full((3, width + 3), tokenizer.pad_token_id, np.int32)
    generated[:, :width] = batch["token_ids"]
    generated[:, width] = eos
    assert preprocessor.decode(generated) == PLAIN
    assert preprocessor.decode(batch["token_ids"][1]) == [PLAIN[1]]
    with pytest.raises(ValueError, match="must match `token_ids`' shape"):
        preprocessor.decode(batch["token_ids"], batch["padding_mask"][:, 1:])


def test_config_round_trip_and_bad_arguments(tokenizer):
    preprocessor = TextPreprocessor(tokenizer, sequence_length=16)
    assert preprocessor.get_config() == {"sequence_length": 16}
    again = TextPreprocessor.from_config(preprocessor.get_config(), tokenizer)
    assert again.sequence_length == 16 and again.tokenizer is tokenizer
    with pytest.raises(ValueError, match="received 0"):
        TextPreprocessor(tokenizer, sequence_length=0)
    with pytest.raises(TypeError, match="received int, which has no `encode`"):
        TextPreprocessor(42)
