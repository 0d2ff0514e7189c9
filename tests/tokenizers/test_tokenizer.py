"""`Tokenizer`: both formats, special tokens from every file, presets."""

import json
import os
import sys

import numpy as np
import pytest
import sentencepiece as spm
import tokenizers

from keras_nlp.saving import PresetError
from keras_nlp.tokenizers import TOKENIZER_FILES
from keras_nlp.tokenizers import Tokenizer
from keras_nlp.tokenizers import find_tokenizer
from tests.tokenizers.tiny_tokenizers import PLAIN
from tests.tokenizers.tiny_tokenizers import TEXT


def _hf(bpe_json):
    return tokenizers.Tokenizer.from_str(bpe_json.decode("utf-8"))


def _sp(model):
    return spm.SentencePieceProcessor(model_proto=model)


# === Text and ids ===


def test_tokenizer_json_round_trips_and_its_post_processor_adds_bos(
    bpe_json, make_preset
):
    bos = _hf(bpe_json).token_to_id("<s>")
    tokenizer = Tokenizer.from_preset(
        make_preset({"tokenizer.json": bpe_json, "tokenizer_config.json": {}})
    )
    # Byte-level BPE round-trips any text, unseen characters included.
    texts = [*TEXT, "naïve café ☕, 12 spaces   and\ttabs"]
    ids = tokenizer.encode(texts)
    assert [tokenizer.decode(row) for row in ids] == texts
    assert ids == [_hf(bpe_json).encode(text).ids for text in texts]
    assert [row[0] for row in ids] == [bos] * len(texts)
    bare = tokenizer.encode(texts[0], add_special_tokens=False)
    assert bare == ids[0][1:]
    # No file names <s> a BOS token: the post-processor adds it anyway.
    assert tokenizer.bos_token_id is None
    assert tokenizer.add_bos is False
    assert tokenizer.vocabulary_size == _hf(bpe_json).get_vocab_size()


def test_sentencepiece_round_trips_and_prepends_bos(sentencepiece_model):
    tokenizer = Tokenizer({"tokenizer.model": sentencepiece_model})
    sp = _sp(sentencepiece_model)
    assert tokenizer.add_bos is True
    assert tokenizer.vocabulary_size == sp.vocab_size()
    for text in PLAIN:
        ids = tokenizer.encode(text)
        assert ids == [sp.bos_id(), *sp.encode(text)]
        assert tokenizer.decode(ids) == text
    assert tokenizer.encode(PLAIN) == [tokenizer.encode(t) for t in PLAIN]
    assert tokenizer.encode(PLAIN[0], add_special_tokens=False) == (
        sp.encode(PLAIN[0])
    )


def test_add_bos_token_false_turns_sentencepiece_bos_off(sentencepiece_model):
    tokenizer = Tokenizer(
        {
            "tokenizer.model": sentencepiece_model,
            "tokenizer_config.json": b'{"add_bos_token": false}',
        }
    )
    assert tokenizer.add_bos is False
    assert tokenizer.encode(PLAIN[0]) == _sp(sentencepiece_model).encode(
        PLAIN[0]
    )


def test_add_eos_token_appends_eos(sentencepiece_model):
    tokenizer = Tokenizer(
        {
            "tokenizer.model": sentencepiece_model,
            "tokenizer_config.json": b'{"add_eos_token": true}',
        }
    )
    sp = _sp(sentencepiece_model)
    assert tokenizer.encode(PLAIN[0]) == [
        sp.bos_id(),
        *sp.encode(PLAIN[0]),
        sp.eos_id(),
    ]


def test_decode_batches_and_keeps_special_tokens_when_asked(
    sentencepiece_model, bpe_json
):
    sp = Tokenizer({"tokenizer.model": sentencepiece_model})
    ids = sp.encode(PLAIN[:2])
    padded = np.full((2, 30), sp.pad_token_id, np.int32)
    for row, row_ids in enumerate(ids):
        padded[row, : len(row_ids)] = row_ids
    # A 2-D array, ragged lists, and a row with EOS padding.
    assert sp.decode(padded) == PLAIN[:2]
    assert sp.decode(ids) == PLAIN[:2]
    assert sp.decode(np.asarray(ids[1])) == PLAIN[1]
    assert sp.decode(ids[1], skip_special_tokens=False) == "<s>" + PLAIN[1]
    hf = Tokenizer({"tokenizer.json": bpe_json})
    hf_ids = hf.encode(TEXT[0])
    assert hf.decode(hf_ids, skip_special_tokens=False) == "<s>" + TEXT[0]
    assert hf.decode([]) == ""


@pytest.mark.parametrize("bad", [-1, "vocabulary_size"])
def test_decode_names_an_id_outside_the_vocabulary(sentencepiece_model, bad):
    tokenizer = Tokenizer({"tokenizer.model": sentencepiece_model})
    bad = tokenizer.vocabulary_size if bad == "vocabulary_size" else bad
    with pytest.raises(ValueError) as error:
        tokenizer.decode([[5, 6], [5, 6, bad]])
    assert str(error.value) == (
        f"Token id {bad} (row 1, position 2) is outside the vocabulary: "
        f"valid ids are 0 to {tokenizer.vocabulary_size - 1}."
    )


def test_encode_names_a_text_that_is_not_a_string(sentencepiece_model):
    tokenizer = Tokenizer({"tokenizer.model": sentencepiece_model})
    with pytest.raises(TypeError, match=r"Text 1 of the batch is a int \(3\)"):
        tokenizer.encode(["fine", 3])


# === Special tokens ===


def test_special_tokens_from_tokenizer_config_and_generation_config(
    bpe_json, make_preset
):
    hf = _hf(bpe_json)
    s, end, pad, eot = (
        hf.token_to_id(t) for t in ("<s>", "</s>", "<pad>", "<|eot|>")
    )
    tokenizer = Tokenizer.from_preset(
        make_preset(
            {
                "tokenizer.json": bpe_json,
                "tokenizer_config.json": {
                    "bos_token": "<s>",
                    # transformers writes AddedToken objects too.
                    "eos_token": {"__type": "AddedToken", "content": "</s>"},
                    "pad_token": "<pad>",
                },
                # Every stop token of an instruct model: the tokenizer's
                # EOS stays first.
                "generation_config.json": {"eos_token_id": [eot, end]},
                # Never reached: the files above name all three.
                "config.json": {"bos_token_id": 7, "eos_token_id": 7},
            }
        )
    )
    assert tokenizer.bos_token_id == s
    assert tokenizer.eos_token_ids == (end, eot)
    assert tokenizer.pad_token_id == pad
    assert tokenizer.add_bos is True
    assert tokenizer.add_eos is False


def test_special_tokens_map_when_tokenizer_config_names_none(
    bpe_json, make_preset
):
    hf = _hf(bpe_json)
    tokenizer = Tokenizer.from_preset(
        make_preset(
            {
                "tokenizer.json": bpe_json,
                "tokenizer_config.json": {"eos_token": "</s>"},
                "special_tokens_map.json": {
                    "bos_token": "<s>",
                    "eos_token": "<|eot|>",
                },
            }
        )
    )
    assert tokenizer.bos_token_id == hf.token_to_id("<s>")
    assert tokenizer.eos_token_ids == (hf.token_to_id("</s>"),)
    # No PAD token: padding uses EOS.
    assert tokenizer.pad_token_id == hf.token_to_id("</s>")


def test_ids_from_generation_config_with_an_eos_list(bpe_json, make_preset):
    tokenizer = Tokenizer.from_preset(
        make_preset(
            {
                "tokenizer.json": bpe_json,
                "generation_config.json": {
                    "bos_token_id": 1,
                    "eos_token_id": [2, 3],
                    "pad_token_id": 0,
                },
            }
        )
    )
    assert tokenizer.bos_token_id == 1
    assert tokenizer.eos_token_ids == (2, 3)
    assert tokenizer.pad_token_id == 0


def test_decode_skips_what_the_files_name_special(bpe_json, make_preset):
    # "." is an ordinary token of tokenizer.json; the config makes it EOS.
    dot = _hf(bpe_json).token_to_id(".")
    tokenizer = Tokenizer.from_preset(
        make_preset(
            {
                "tokenizer.json": bpe_json,
                "generation_config.json": {"eos_token_id": dot},
            }
        )
    )
    ids = tokenizer.encode("The lazy dog.")
    assert ids[-1] == dot
    assert tokenizer.decode(ids) == "The lazy dog"
    assert tokenizer.decode(ids, skip_special_tokens=False) == (
        "<s>The lazy dog."
    )


@pytest.mark.parametrize("nested", [False, True])
def test_config_json_is_the_last_resort(bpe_json, make_preset, nested):
    ids = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
    config = {"text_config": ids} if nested else ids
    tokenizer = Tokenizer.from_preset(
        make_preset(
            {
                "tokenizer.json": bpe_json,
                "generation_config.json": {"eos_token_id": 3},
                "config.json": config,
            }
        )
    )
    assert tokenizer.bos_token_id == 1
    assert tokenizer.eos_token_ids == (3,)
    assert tokenizer.pad_token_id == 0


def test_sentencepiece_own_ids_and_pad_falls_back_to_eos(
    sentencepiece_model, gemma_layout_model
):
    sp = _sp(sentencepiece_model)
    assert sp.pad_id() == -1
    tokenizer = Tokenizer({"tokenizer.model": sentencepiece_model})
    assert tokenizer.bos_token_id == sp.bos_id()
    assert tokenizer.eos_token_ids == (sp.eos_id(),)
    assert tokenizer.pad_token_id == sp.eos_id()
    gemma = _sp(gemma_layout_model)
    tokenizer = Tokenizer({"tokenizer.model": gemma_layout_model})
    assert (tokenizer.pad_token_id, tokenizer.eos_token_ids) == (
        gemma.pad_id(),
        (gemma.eos_id(),),
    )
    assert tokenizer.bos_token_id == gemma.bos_id()
    assert tokenizer.encode("the")[0] == gemma.piece_to_id("<bos>")


def test_sentencepiece_token_names_and_added_tokens(gemma_layout_model):
    tokenizer = Tokenizer(
        {
            "tokenizer.model": gemma_layout_model,
            "tokenizer_config.json": json.dumps(
                {
                    "eos_token": "<bos>",
                    # An added token past the model's vocabulary.
                    "pad_token": "<extra_pad>",
                    "added_tokens_decoder": {
                        "64": {"content": "<extra_pad>", "special": True}
                    },
                }
            ).encode(),
        }
    )
    gemma = _sp(gemma_layout_model)
    assert tokenizer.eos_token_ids == (gemma.piece_to_id("<bos>"),)
    assert tokenizer.pad_token_id == 64
    ids = [*tokenizer.encode("the"), 64]
    assert tokenizer.decode(ids) == "the"
    assert tokenizer.decode(ids, skip_special_tokens=False).endswith(
        "the<extra_pad>"
    )


def test_no_special_tokens_pads_with_zero(bpe_json):
    tokenizer = Tokenizer({"tokenizer.json": bpe_json})
    assert tokenizer.bos_token_id is None
    assert tokenizer.eos_token_ids == ()
    assert tokenizer.pad_token_id == 0


def test_unknown_special_token_is_named(bpe_json, make_preset):
    path = make_preset(
        {
            "tokenizer.json": bpe_json,
            "tokenizer_config.json": {"eos_token": "<nope>"},
        }
    )
    with pytest.raises(ValueError) as error:
        Tokenizer.from_preset(path)
    size = _hf(bpe_json).get_vocab_size()
    assert str(error.value) == (
        f"{path / 'tokenizer_config.json'} names `eos_token` '<nope>', which "
        f"is not a token of the tokenizer.json ({size} tokens) nor of "
        "`added_tokens_decoder`."
    )


def test_bad_eos_token_id_is_named(bpe_json, make_preset):
    path = make_preset(
        {
            "tokenizer.json": bpe_json,
            "generation_config.json": {"eos_token_id": [2, "3"]},
        }
    )
    with pytest.raises(ValueError, match=r"`eos_token_id` must be a non-neg"):
        Tokenizer.from_preset(path)


# === Finding and loading ===


def test_tokenizer_json_is_preferred_over_sentencepiece(
    bpe_json, sentencepiece_model, make_preset
):
    path = make_preset(
        {"tokenizer.json": bpe_json, "tokenizer.model": sentencepiece_model}
    )
    tokenizer = Tokenizer.from_preset(path)
    assert tokenizer.encode(TEXT[0]) == _hf(bpe_json).encode(TEXT[0]).ids


def test_missing_tokenizer_names_directory_and_files(tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        Tokenizer.from_preset(tmp_path)
    assert str(error.value) == (
        f"No tokenizer in {tmp_path}: looked for tokenizer.json (Hugging "
        "Face `tokenizers`), tokenizer.model (SentencePiece) and "
        "assets/tokenizer/vocabulary.spm (keras-hub); found none."
    )
    assert find_tokenizer(tmp_path) is None
    missing = tmp_path / "missing"
    with pytest.raises(FileNotFoundError, match=f"{missing} does not exist"):
        find_tokenizer(missing)


def test_unsupported_tokenizer_files_are_named(make_preset):
    path = make_preset({"vocab.json": {"a": 0}, "merges.txt": b"#version\n"})
    message = (
        f"The directory {path} has tokenizer files of a format that is not "
        "read here (vocab.json, merges.txt) and neither tokenizer.json nor "
        "tokenizer.model."
    )
    with pytest.raises(ValueError) as error:
        Tokenizer.from_preset(path)
    assert str(error.value).startswith(message)
    # Loading a model for token ids still works: a warning, no tokenizer.
    with pytest.warns(UserWarning) as warned:
        assert find_tokenizer(path) is None
    assert str(warned[0].message).startswith(message)
    assert str(warned[0].message).endswith(
        "Loading without a tokenizer: prompts and outputs are token ids."
    )


def test_a_linked_tokenizer_file_is_refused(bpe_json, make_preset, tmp_path):
    path = make_preset({})
    (tmp_path / "elsewhere.json").write_bytes(bpe_json)
    os.symlink(tmp_path / "elsewhere.json", path / "tokenizer.json")
    with pytest.raises(PresetError, match="is a symbolic link"):
        Tokenizer.from_preset(path)


@pytest.mark.parametrize(
    "name, cap, why",
    [
        (
            "tokenizer.json",
            256,
            "the largest published tokenizer.json are about 30 MB",
        ),
        (
            "tokenizer.model",
            64,
            "the largest published SentencePiece models are about 5 MB",
        ),
        (
            "generation_config.json",
            64,
            "a tokenizer's JSON files are megabytes at most",
        ),
    ],
)
def test_a_file_past_its_size_cap_is_refused_unread(
    bpe_json, sentencepiece_model, make_preset, name, cap, why
):
    model = {"tokenizer.model": sentencepiece_model}
    if name == "tokenizer.model":
        model = {"tokenizer.json": bpe_json}
    path = make_preset(model)
    # A sparse file: the cap is checked from its size, nothing is read.
    (path / name).write_bytes(b"")
    os.truncate(path / name, cap * 1024**2 + 1)
    with pytest.raises(PresetError) as error:
        Tokenizer.from_preset(path)
    assert str(error.value) == (
        f"{path / name} is larger than {cap} MiB; {why}."
    )


def test_a_missing_package_is_named(bpe_json, monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(ImportError, match=r"pip install tokenizers"):
        Tokenizer({"tokenizer.json": bpe_json})


# === Saving ===


@pytest.mark.parametrize("kind", ["tokenizer.json", "tokenizer.model"])
def test_save_to_preset_copies_the_files_and_reloads_identically(
    bpe_json, sentencepiece_model, make_preset, kind
):
    model = bpe_json if kind == "tokenizer.json" else sentencepiece_model
    token_files = {
        kind: model,
        "tokenizer_config.json": {"eos_token": "</s>"},
        "special_tokens_map.json": {"bos_token": "<s>"},
        "generation_config.json": {"eos_token_id": [2, 3]},
    }
    source = make_preset({**token_files, "config.json": {"bos_token_id": 9}})
    tokenizer = Tokenizer.from_preset(source)
    # The target holds a backbone's config.json, and the other format's
    # tokenizer file, which must not shadow the saved one.
    other = "tokenizer.model" if kind == "tokenizer.json" else "tokenizer.json"
    target = make_preset({"config.json": {"backbone": 1}, other: b"stale"})
    tokenizer.save_to_preset(target)
    assert sorted(os.listdir(target)) == sorted(["config.json", *token_files])
    for name in token_files:
        assert (target / name).read_bytes() == (source / name).read_bytes()
    assert json.loads((target / "config.json").read_bytes()) == {"backbone": 1}
    reloaded = Tokenizer.from_preset(target)
    assert reloaded.encode(TEXT) == tokenizer.encode(TEXT)
    for attribute in ("bos_token_id", "eos_token_ids", "pad_token_id"):
        assert getattr(reloaded, attribute) == getattr(tokenizer, attribute)
    assert set(TOKENIZER_FILES) >= set(token_files)
    assert "config.json" not in TOKENIZER_FILES


def test_ids_from_config_json_survive_save_to_preset(bpe_json, make_preset):
    source = make_preset(
        {
            "tokenizer.json": bpe_json,
            "generation_config.json": {"bos_token_id": 1},
            "config.json": {"eos_token_id": [2, 3], "pad_token_id": 0},
        }
    )
    tokenizer = Tokenizer.from_preset(source)
    target = make_preset({})
    tokenizer.save_to_preset(target)
    assert not (target / "config.json").exists()
    assert json.loads((target / "generation_config.json").read_bytes()) == {
        "bos_token_id": 1,
        "eos_token_id": [2, 3],
        "pad_token_id": 0,
    }
    reloaded = Tokenizer.from_preset(target)
    assert (reloaded.eos_token_ids, reloaded.pad_token_id) == ((2, 3), 0)


# === keras-hub as the oracle ===


def test_sentencepiece_ids_equal_keras_hub(sentencepiece_model):
    import keras_hub

    theirs = keras_hub.tokenizers.SentencePieceTokenizer(
        proto=sentencepiece_model
    )
    ours = Tokenizer({"tokenizer.model": sentencepiece_model})
    expected = [np.asarray(row).tolist() for row in theirs(TEXT)]
    assert ours.encode(TEXT, add_special_tokens=False) == expected


def test_byte_pair_ids_equal_keras_hub(bpe_json):
    import keras_hub

    model = json.loads(bpe_json)["model"]
    merges = [
        " ".join(m) if isinstance(m, list) else m for m in model["merges"]
    ]
    theirs = keras_hub.tokenizers.BytePairTokenizer(
        vocabulary=model["vocab"], merges=merges
    )
    ours = Tokenizer({"tokenizer.json": bpe_json})
    texts = [*TEXT, "many devices  back again\n tokens"]
    expected = [np.asarray(theirs(text)).tolist() for text in texts]
    assert ours.encode(texts, add_special_tokens=False) == expected


def test_keras_hub_gemma_preset_loads_with_its_special_tokens(
    gemma_layout_model, tmp_path
):
    import keras_hub

    theirs = keras_hub.models.GemmaTokenizer(proto=gemma_layout_model)
    theirs.save_to_preset(str(tmp_path))
    # keras-hub's tokenizer.json is a Keras config beside the model asset.
    assert "class_name" in json.loads((tmp_path / "tokenizer.json").read_text())
    ours = Tokenizer.from_preset(tmp_path)
    assert ours.bos_token_id == theirs.start_token_id
    assert ours.eos_token_ids == (theirs.end_token_id,)
    assert ours.pad_token_id == theirs.pad_token_id
    expected = [np.asarray(row).tolist() for row in theirs(PLAIN)]
    assert ours.encode(PLAIN) == [[theirs.start_token_id, *r] for r in expected]
    # Saved in our layout: a plain tokenizer.model, no keras-hub config.
    target = tmp_path / "ours"
    ours.save_to_preset(target)
    assert sorted(os.listdir(target)) == ["tokenizer.model"]


def test_keras_hub_byte_pair_preset_is_named_not_misread(bpe_json, tmp_path):
    import keras_hub

    model = json.loads(bpe_json)["model"]
    merges = [
        " ".join(m) if isinstance(m, list) else m for m in model["merges"]
    ]
    keras_hub.tokenizers.BytePairTokenizer(
        vocabulary=model["vocab"], merges=merges
    ).save_to_preset(str(tmp_path))
    with pytest.raises(ValueError) as error:
        Tokenizer.from_preset(tmp_path)
    assert str(error.value) == (
        f"{tmp_path / 'tokenizer.json'} is a keras-hub tokenizer config "
        "('BytePairTokenizer'), not a Hugging Face tokenizer.json, and "
        f"{tmp_path / 'assets/tokenizer/vocabulary.spm'} (a keras-hub "
        "SentencePiece model, the only keras-hub tokenizer read here) does "
        "not exist. Put the model's Hugging Face tokenizer.json or "
        "SentencePiece tokenizer.model into the preset."
    )
