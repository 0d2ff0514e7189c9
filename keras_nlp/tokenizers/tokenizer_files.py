"""Finding and reading a tokenizer's files in a preset directory.

A directory's tokenizer is a Hugging Face `tokenizer.json` or a
SentencePiece `tokenizer.model`, with the files beside it that name its
special tokens; a keras-hub preset keeps its SentencePiece model under
`assets/tokenizer/vocabulary.spm`, beside a `tokenizer.json` that is a
Keras layer config. Reading goes through `keras_nlp.saving.PresetDirectory`,
one path component at a time, as for a backbone's files: a symbolic link
(a file, or a folder like `assets`) is followed only when it stays inside
the preset (or, in a Hugging Face cache snapshot, leads into the model's
blobs), and is refused, before anything behind it is read, otherwise.
"""

import json
import os

from keras_nlp.saving.json_depth import MAX_JSON_DEPTH
from keras_nlp.saving.json_depth import check_json_depth
from keras_nlp.saving.json_depth import json_depth
from keras_nlp.saving.preset_files import MAX_JSON_BYTES
from keras_nlp.saving.preset_files import PresetDirectory

TOKENIZER_JSON = "tokenizer.json"
SENTENCEPIECE_MODEL = "tokenizer.model"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
GENERATION_CONFIG = "generation_config.json"
MODEL_CONFIG = "config.json"
# The files a tokenizer is loaded from and `save_to_preset` writes.
# `config.json` is read for special token ids as a last resort but belongs
# to the backbone: it is never copied or overwritten.
TOKENIZER_FILES = (
    TOKENIZER_JSON,
    SENTENCEPIECE_MODEL,
    TOKENIZER_CONFIG,
    SPECIAL_TOKENS_MAP,
    GENERATION_CONFIG,
)
# keras-hub keeps a SentencePiece model here, beside a `tokenizer.json`
# that is a Keras layer config rather than a Hugging Face tokenizer.
KERAS_HUB_SENTENCEPIECE = ("assets", "tokenizer", "vocabulary.spm")
# What a file may hold at most, and why that is enough: far above any
# published tokenizer (the largest tokenizer.json are ~30 MB, SentencePiece
# models ~5 MB), these only stop a huge file from being read into memory.
# The JSON beside them is capped as a preset's config is.
_MAX_BYTES = {
    TOKENIZER_JSON: (
        256 * 1024**2,
        "the largest published tokenizer.json are about 30 MB",
    ),
    SENTENCEPIECE_MODEL: (
        64 * 1024**2,
        "the largest published SentencePiece models are about 5 MB",
    ),
}
_JSON_CAP = (MAX_JSON_BYTES, "a tokenizer's JSON files are megabytes at most")
# Files of tokenizer formats that are not read here; named in errors.
_UNSUPPORTED_FILES = (
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
)


def parse_json(data, where):
    """The JSON object in `data` (bytes); `where` names it in errors."""
    check_json_depth(data, where)
    try:
        value = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{where} is not valid JSON: {error}.") from error
    if not isinstance(value, dict):
        raise ValueError(
            f"{where} holds a JSON {type(value).__name__}; a JSON object "
            "was expected."
        )
    return value


def _read_bytes(directory, name):
    """The file `name`, refused (naming its cap) past `_MAX_BYTES`."""
    cap = _MAX_BYTES.get(name, _JSON_CAP)
    if name == KERAS_HUB_SENTENCEPIECE[-1]:
        cap = _MAX_BYTES[SENTENCEPIECE_MODEL]
    return directory.read_bytes(name, *cap)


def _is_keras_hub_config(data):
    """Whether a `tokenizer.json` is keras-hub's layer config."""
    if json_depth(data) > MAX_JSON_DEPTH:
        return False  # Refused, naming it, when it is read as a tokenizer.
    try:
        value = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return (
        isinstance(value, dict)
        and "class_name" in value
        and "config" in value
        and "model" not in value
    )


def _read_keras_hub_sentencepiece(directory):
    """The SentencePiece model of a keras-hub preset's tokenizer, or None.

    `assets` and `assets/tokenizer` are opened one after the other, each
    relative to the folder above it: a link among them is followed only as
    `PresetDirectory` allows (inside the preset), so nothing outside the
    preset is read.
    """
    try:
        assets = directory.subdirectory(*KERAS_HUB_SENTENCEPIECE[:-1])
    except (FileNotFoundError, NotADirectoryError):
        return None
    with assets:
        if assets.exists(KERAS_HUB_SENTENCEPIECE[-1]):
            return _read_bytes(assets, KERAS_HUB_SENTENCEPIECE[-1])
    return None


def _why_unreadable(path, keras_hub_config, unsupported):
    """Why a directory without a readable tokenizer has none, or None
    when it has no tokenizer files at all."""
    if keras_hub_config is not None:
        return (
            f"{os.path.join(path, TOKENIZER_JSON)} is a keras-hub tokenizer "
            f"config ({keras_hub_config.get('class_name')!r}), not a Hugging "
            "Face tokenizer.json, and "
            f"{os.path.join(path, *KERAS_HUB_SENTENCEPIECE)} (a keras-hub "
            "SentencePiece model, the only keras-hub tokenizer read here) "
            "does not exist. Put the model's Hugging Face tokenizer.json or "
            f"SentencePiece {SENTENCEPIECE_MODEL} into the preset."
        )
    if unsupported:
        return (
            f"The directory {path} has tokenizer files of a format that is "
            f"not read here ({', '.join(unsupported)}) and neither "
            f"{TOKENIZER_JSON} nor {SENTENCEPIECE_MODEL}. Write a "
            "tokenizer.json next to them, e.g. with transformers: "
            "`AutoTokenizer.from_pretrained(path).save_pretrained(path)`."
        )
    return None


def read_tokenizer_files(path):
    """The tokenizer files of a directory.

    Args:
        path: str, the directory.

    Returns:
        `({name: bytes}, None)`, or `(None, why)` when it has no tokenizer
        that is read here (`why` is None when it has no tokenizer files at
        all). A keras-hub preset's SentencePiece model is returned as
        `tokenizer.model`, and its layer config is left out.

    Raises:
        FileNotFoundError: `path` is not a directory.
    """
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"The tokenizer directory {path} does not exist or is not a "
            f"directory; a tokenizer is read from its {TOKENIZER_JSON} or "
            f"{SENTENCEPIECE_MODEL}."
        )
    files = {}
    keras_hub_config = None
    with PresetDirectory(path) as directory:
        for name in (*TOKENIZER_FILES, MODEL_CONFIG):
            if directory.exists(name):
                files[name] = _read_bytes(directory, name)
        unsupported = [n for n in _UNSUPPORTED_FILES if directory.exists(n)]
        if TOKENIZER_JSON in files and _is_keras_hub_config(
            files[TOKENIZER_JSON]
        ):
            keras_hub_config = json.loads(files.pop(TOKENIZER_JSON))
            if SENTENCEPIECE_MODEL not in files:
                model = _read_keras_hub_sentencepiece(directory)
                if model is not None:
                    files[SENTENCEPIECE_MODEL] = model
    if TOKENIZER_JSON in files or SENTENCEPIECE_MODEL in files:
        return files, None
    return None, _why_unreadable(path, keras_hub_config, unsupported)
