"""The two tokenizer libraries behind `Tokenizer`: loading, and what differs.

A Hugging Face `tokenizer.json` is read with the `tokenizers` package, a
SentencePiece `tokenizer.model` with `sentencepiece`. Each package is
imported only when a file needs it, so neither is a dependency of the
library.
"""

import importlib

from keras_nlp.saving.json_depth import check_json_depth
from keras_nlp.tokenizers.tokenizer_files import SENTENCEPIECE_MODEL
from keras_nlp.tokenizers.tokenizer_files import TOKENIZER_JSON


def _import(module, file_name):
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"Reading a {file_name} needs the `{module}` package, which is "
            f"not installed: `pip install {module}` (or "
            "`pip install keras-nlp-parallel[text]`)."
        ) from error


def load_huggingface(data, where):
    """A `tokenizers.Tokenizer` from a `tokenizer.json`'s bytes.

    Args:
        data: bytes of the file.
        where: str, the file as errors name it.
    """
    tokenizers = _import("tokenizers", TOKENIZER_JSON)
    check_json_depth(data, where)
    try:
        return tokenizers.Tokenizer.from_str(data.decode("utf-8"))
    except Exception as error:
        raise ValueError(
            f"{where} is not a Hugging Face tokenizer file that "
            f"`tokenizers` can read: {error}"
        ) from error


def load_sentencepiece(data, where):
    """A `sentencepiece.SentencePieceProcessor` from a model's bytes.

    Args:
        data: bytes of the `tokenizer.model`.
        where: str, the file as errors name it.
    """
    sentencepiece = _import("sentencepiece", SENTENCEPIECE_MODEL)
    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(data)
    except Exception as error:
        raise ValueError(
            f"{where} is not a SentencePiece model: {error}"
        ) from error
    return processor


def sentencepiece_decode(
    processor, ids, special_ids, added_names, skip_special_tokens
):
    """The text of `ids`, special tokens written as their pieces or left out.

    SentencePiece's own `decode` drops control pieces and cannot spell ids
    past its vocabulary (the files' added tokens), so the ordinary ids are
    decoded in runs and the special ones in between are written (or
    skipped) one by one.

    Args:
        processor: a `SentencePieceProcessor`.
        ids: list of int, each in the vocabulary or a special id.
        special_ids: the ids the files name as special tokens.
        added_names: dict, id past the vocabulary -> its text.
        skip_special_tokens: bool, whether to leave the special ones out.
    """
    vocabulary_size = processor.vocab_size()
    pieces, run = [], []
    for i in ids:
        special = i in special_ids or (
            i < vocabulary_size and processor.is_control(i)
        )
        if not special:
            run.append(i)
            continue
        if skip_special_tokens:
            continue
        if run:
            pieces.append(processor.decode(run))
            run = []
        if i < vocabulary_size:
            pieces.append(processor.id_to_piece(i))
        else:
            pieces.append(added_names.get(i, ""))
    if run:
        pieces.append(processor.decode(run))
    return "".join(pieces)
