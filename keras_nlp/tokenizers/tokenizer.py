"""Text to token ids and back, from a preset directory's tokenizer files.

Two formats, one interface: a Hugging Face `tokenizer.json` (read with the
`tokenizers` package) and a SentencePiece `tokenizer.model` (read with
`sentencepiece`). A keras-hub preset's SentencePiece tokenizer
(`assets/tokenizer/vocabulary.spm`) loads too. Each package is imported
only when a file needs it.

Special tokens. Each of BOS, EOS and PAD is taken from the first of these
files that names it (a token in `tokenizer_config.json` and
`special_tokens_map.json`, an id in the others):

1. `tokenizer_config.json` (`bos_token`, `eos_token`, `pad_token`);
2. `special_tokens_map.json` (the same fields);
3. `generation_config.json` (`bos_token_id`, `eos_token_id`,
   `pad_token_id`);
4. `config.json` (the same fields, or its `text_config`'s): the last
   resort, read but never copied;
5. the SentencePiece model's own `bos_id()`, `eos_id()`, `pad_id()`
   (-1 means none).

EOS is a set of stop tokens: the token of the tokenizer files (1, 2) comes
first (it is the one appended to training text), then every id of
`generation_config.json`'s `eos_token_id`, which may be a list (Llama 3
Instruct stops at three). Without a PAD token, padding uses the first EOS,
and without either, id 0.

The files are read whole when the tokenizer loads and kept, so
`save_to_preset` writes them as they were even if the source directory has
changed since. Reading goes through `keras_nlp.saving.PresetDirectory`:
symbolic links are refused, as for a backbone's files.
"""

import importlib
import json
import os
import warnings

import numpy as np

from keras_nlp.saving.preset_files import PresetDirectory
from keras_nlp.saving.preset_files import write_file

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
# Files of tokenizer formats that are not read here; named in errors.
_UNSUPPORTED_FILES = (
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
)
_TOKEN_FILES = (TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP)
_ID_FILES = (GENERATION_CONFIG, MODEL_CONFIG)
_ROLES = ("bos", "eos", "pad")


def _import(module, file_name):
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"Reading a {file_name} needs the `{module}` package, which is "
            f"not installed: `pip install {module}` (or "
            "`pip install keras-nlp-parallel[text]`)."
        ) from error


def _read_bytes(directory, name):
    fd = directory.open(name)
    with os.fdopen(fd, "rb") as file:
        return file.read()


def _parse_json(data, where):
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


def _is_keras_hub_config(data):
    """Whether a `tokenizer.json` is keras-hub's layer config."""
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


def _read_keras_hub_sentencepiece(path):
    """The SentencePiece model of a keras-hub preset's tokenizer, or None."""
    assets = os.path.join(path, *KERAS_HUB_SENTENCEPIECE[:-1])
    if not os.path.isdir(assets):
        return None
    with PresetDirectory(assets) as directory:
        if directory.exists(KERAS_HUB_SENTENCEPIECE[-1]):
            return _read_bytes(directory, KERAS_HUB_SENTENCEPIECE[-1])
    return None


def _read_files(path):
    """The tokenizer files of a directory: `({name: bytes}, None)`, or
    `(None, why)` when it has no tokenizer that is read here (`why` is
    None when it has no tokenizer files at all)."""
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"The tokenizer directory {path} does not exist or is not a "
            f"directory; a tokenizer is read from its {TOKENIZER_JSON} or "
            f"{SENTENCEPIECE_MODEL}."
        )
    files = {}
    with PresetDirectory(path) as directory:
        for name in (*TOKENIZER_FILES, MODEL_CONFIG):
            if directory.exists(name):
                files[name] = _read_bytes(directory, name)
        unsupported = [n for n in _UNSUPPORTED_FILES if directory.exists(n)]
    keras_hub_config = None
    if TOKENIZER_JSON in files and _is_keras_hub_config(files[TOKENIZER_JSON]):
        keras_hub_config = json.loads(files.pop(TOKENIZER_JSON))
        if SENTENCEPIECE_MODEL not in files:
            model = _read_keras_hub_sentencepiece(path)
            if model is not None:
                files[SENTENCEPIECE_MODEL] = model
    if TOKENIZER_JSON in files or SENTENCEPIECE_MODEL in files:
        return files, None
    if keras_hub_config is not None:
        return None, (
            f"{os.path.join(path, TOKENIZER_JSON)} is a keras-hub tokenizer "
            f"config ({keras_hub_config.get('class_name')!r}), not a Hugging "
            "Face tokenizer.json, and "
            f"{os.path.join(path, *KERAS_HUB_SENTENCEPIECE)} (a keras-hub "
            "SentencePiece model, the only keras-hub tokenizer read here) "
            "does not exist. Put the model's Hugging Face tokenizer.json or "
            f"SentencePiece {SENTENCEPIECE_MODEL} into the preset."
        )
    if unsupported:
        return None, (
            f"The directory {path} has tokenizer files of a format that is "
            f"not read here ({', '.join(unsupported)}) and neither "
            f"{TOKENIZER_JSON} nor {SENTENCEPIECE_MODEL}. Write a "
            "tokenizer.json next to them, e.g. with transformers: "
            "`AutoTokenizer.from_pretrained(path).save_pretrained(path)`."
        )
    return None, None


def find_tokenizer(directory):
    """The tokenizer of a preset directory, or `None` if it has none.

    Args:
        directory: str or path-like, a preset directory (ours, keras-hub's
            or a Hugging Face one).

    Returns:
        A `Tokenizer`, or `None` when the directory has neither
        `tokenizer.json` nor `tokenizer.model` (nor a keras-hub
        SentencePiece tokenizer). When it has only tokenizer files of a
        format not read here (`vocab.json` and `merges.txt`, `vocab.txt`,
        a keras-hub byte-pair tokenizer, ...), a warning names them and
        the result is `None` too: the model still loads, for token ids.

    Raises:
        FileNotFoundError: `directory` is not a directory.
        ValueError: a tokenizer file is invalid.

    Example:

    ```python
    import tempfile
    from keras_nlp.tokenizers import find_tokenizer

    assert find_tokenizer(tempfile.mkdtemp()) is None
    ```
    """
    path = os.fspath(directory)
    files, why = _read_files(path)
    if files is None:
        if why is not None:
            warnings.warn(
                f"{why} Loading without a tokenizer: prompts and outputs "
                "are token ids.",
                stacklevel=2,
            )
        return None
    return Tokenizer(files, source=path)


class Tokenizer:
    """Text to token ids and back, for one Hugging Face or SentencePiece
    tokenizer.

    A plain Python object that runs on the host (never traced). Load one
    with `Tokenizer.from_preset(directory)`; the constructor takes the file
    contents themselves. See the module docstring for where the special
    tokens come from.

    Args:
        files: dict, file name -> bytes: `tokenizer.json` or
            `tokenizer.model` (`tokenizer.json` wins when both are given),
            and optionally `tokenizer_config.json`,
            `special_tokens_map.json`, `generation_config.json` and
            `config.json`.
        source: str, where the files came from; named in error messages.

    Attributes:
        bos_token_id: int or None, the beginning-of-sequence token.
        eos_token_ids: tuple of int, maybe empty: every stop token, the
            tokenizer's own EOS first.
        pad_token_id: int, the padding token: the PAD token, or the first
            EOS when there is none, or 0 when there is neither.
        add_bos: bool, whether `encode(..., add_special_tokens=True)`
            starts with BOS. For a `tokenizer.json` its post-processor
            decides (and `tokenizer_config.json`'s `add_bos_token` is not
            read); for SentencePiece, `add_bos_token` if the config has
            it, else whether the model has a BOS token.
        add_eos: bool, whether `encode(..., add_special_tokens=True)`
            ends with EOS: for SentencePiece `add_eos_token` (default
            False); for a `tokenizer.json`, its post-processor.
        source: str, where the files came from.

    Example:

    ```python
    import io
    import tempfile
    import sentencepiece as spm
    from keras_nlp.tokenizers import Tokenizer

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["the cat sat on the mat"] * 4),
        model_writer=model, vocab_size=20, hard_vocab_limit=False,
        minloglevel=2,
    )
    tokenizer = Tokenizer({"tokenizer.model": model.getvalue()})
    ids = tokenizer.encode("the cat sat")
    assert ids[0] == tokenizer.bos_token_id
    assert tokenizer.decode(ids) == "the cat sat"
    tokenizer.save_to_preset(tempfile.mkdtemp())
    ```
    """

    def __init__(self, files, source="<memory>"):
        if not isinstance(files, dict):
            raise TypeError(
                "`files` must be a dict of file name -> bytes; received "
                f"{type(files).__name__}."
            )
        self.source = str(source)
        if TOKENIZER_JSON in files:
            self._kind = TOKENIZER_JSON
        elif SENTENCEPIECE_MODEL in files:
            self._kind = SENTENCEPIECE_MODEL
        else:
            raise ValueError(
                f"No tokenizer in {self.source}: looked for {TOKENIZER_JSON} "
                f"and {SENTENCEPIECE_MODEL}; received {sorted(files)}."
            )
        for name, data in files.items():
            if name not in (*TOKENIZER_FILES, MODEL_CONFIG):
                raise ValueError(
                    f"Unexpected tokenizer file {name!r} from {self.source}; "
                    f"expected some of {(*TOKENIZER_FILES, MODEL_CONFIG)}."
                )
            if not isinstance(data, bytes):
                raise TypeError(
                    f"The contents of {name} must be bytes; received "
                    f"{type(data).__name__}."
                )
        # The backbone's config.json is read, never kept or copied; the
        # other format's model file is not kept either.
        skip = (MODEL_CONFIG, SENTENCEPIECE_MODEL)
        if self._kind == SENTENCEPIECE_MODEL:
            skip = (MODEL_CONFIG, TOKENIZER_JSON)
        self._files = {n: d for n, d in files.items() if n not in skip}
        configs = {
            name: _parse_json(files[name], self._where(name))
            for name in (*_TOKEN_FILES, *_ID_FILES)
            if name in files
        }
        self._load_backend(files[self._kind])
        self._read_special_tokens(configs)

    # === Loading ===

    def _where(self, name):
        if self.source == "<memory>":
            return name
        return os.path.join(self.source, name)

    def _load_backend(self, data):
        if self._kind == TOKENIZER_JSON:
            tokenizers = _import("tokenizers", TOKENIZER_JSON)
            try:
                self._hf = tokenizers.Tokenizer.from_str(data.decode("utf-8"))
            except Exception as error:
                raise ValueError(
                    f"{self._where(TOKENIZER_JSON)} is not a Hugging Face "
                    f"tokenizer file that `tokenizers` can read: {error}"
                ) from error
            self._sp = None
            self.vocabulary_size = self._hf.get_vocab_size(
                with_added_tokens=True
            )
        else:
            sentencepiece = _import("sentencepiece", SENTENCEPIECE_MODEL)
            self._hf = None
            self._sp = sentencepiece.SentencePieceProcessor()
            try:
                self._sp.LoadFromSerializedProto(data)
            except Exception as error:
                raise ValueError(
                    f"{self._where(SENTENCEPIECE_MODEL)} is not a "
                    f"SentencePiece model: {error}"
                ) from error
            self.vocabulary_size = self._sp.vocab_size()

    def _token_id(self, token, name, field, added_tokens):
        """The id of a special token named in a tokenizer file."""
        if isinstance(token, dict):
            token = token.get("content")
        if not isinstance(token, str):
            raise ValueError(
                f"{self._where(name)}: `{field}` must be a token string or "
                f"an object with a 'content' string; received {token!r}."
            )
        found = None
        if self._hf is not None:
            found = self._hf.token_to_id(token)
        else:
            piece = self._sp.piece_to_id(token)
            if self._sp.id_to_piece(piece) == token:
                found = piece
        if found is None:
            found = added_tokens.get(token)
        if found is None:
            raise ValueError(
                f"{self._where(name)} names `{field}` {token!r}, which is "
                f"not a token of the {self._kind} ({self.vocabulary_size} "
                "tokens) nor of `added_tokens_decoder`."
            )
        return found

    def _config_ids(self, configs, name, role):
        """The ids a config file gives by number for a role, as a list."""
        config = configs.get(name, {})
        field = f"{role}_token_id"
        value = config.get(field)
        if value is None and isinstance(config.get("text_config"), dict):
            value = config["text_config"].get(field)
        if value is None:
            return []
        values = (
            value if (role == "eos" and isinstance(value, list)) else [value]
        )
        for item in values:
            if isinstance(item, bool) or not isinstance(item, int) or item < 0:
                raise ValueError(
                    f"{self._where(name)}: `{field}` must be a non-negative "
                    f"integer{' or a list of them' if role == 'eos' else ''}"
                    f"; received {value!r}."
                )
        return list(values)

    def _named(self, role, configs, added_tokens):
        """(file, ids) of every source naming a role, first ones first."""
        for name in _TOKEN_FILES:
            token = configs.get(name, {}).get(f"{role}_token")
            if token is not None:
                field = f"{role}_token"
                yield name, [self._token_id(token, name, field, added_tokens)]
        for name in _ID_FILES:
            ids = self._config_ids(configs, name, role)
            if ids:
                yield name, ids
        if self._sp is not None:
            own = getattr(self._sp, f"{role}_id")()
            if own >= 0:
                yield SENTENCEPIECE_MODEL, [own]

    def _role_ids(self, role, configs, added_tokens):
        """(ids, source file) of a role: the first source's ids; for EOS
        from a tokenizer file, `generation_config.json`'s stop ids too."""
        for name, ids in self._named(role, configs, added_tokens):
            if role == "eos" and name in _TOKEN_FILES:
                ids += self._config_ids(configs, GENERATION_CONFIG, role)
            return list(dict.fromkeys(ids)), name
        return [], None

    def _read_special_tokens(self, configs):
        added_tokens = {}
        decoder = configs.get(TOKENIZER_CONFIG, {}).get("added_tokens_decoder")
        for key, token in (decoder or {}).items():
            if isinstance(token, dict) and str(key).isdigit():
                added_tokens[token.get("content")] = int(key)
        self._added_names = {i: token for token, i in added_tokens.items()}
        found, sources = {}, {}
        for role in _ROLES:
            found[role], sources[role] = self._role_ids(
                role, configs, added_tokens
            )
        self.bos_token_id = found["bos"][0] if found["bos"] else None
        self.eos_token_ids = tuple(found["eos"])
        if found["pad"]:
            self.pad_token_id = found["pad"][0]
        elif self.eos_token_ids:
            self.pad_token_id = self.eos_token_ids[0]
        else:
            self.pad_token_id = 0
        self._special_ids = frozenset(
            [*found["bos"], *found["eos"], *found["pad"]]
        )
        tokenizer_config = configs.get(TOKENIZER_CONFIG, {})
        if self._sp is not None:
            self._add_bos = self._flag(
                tokenizer_config, "add_bos_token", self.bos_token_id is not None
            )
            self._add_eos = self._flag(tokenizer_config, "add_eos_token", False)
            if self._add_bos and self.bos_token_id is None:
                raise ValueError(
                    f"{self._where(TOKENIZER_CONFIG)} sets add_bos_token "
                    "but no file names a BOS token."
                )
            if self._add_eos and not self.eos_token_ids:
                raise ValueError(
                    f"{self._where(TOKENIZER_CONFIG)} sets add_eos_token "
                    "but no file names an EOS token."
                )
        else:
            # The post-processor decides; an empty text shows what it adds.
            added = self._hf.encode("", add_special_tokens=True).ids
            self._add_bos = self.bos_token_id is not None and added[:1] == [
                self.bos_token_id
            ]
            self._add_eos = bool(added) and added[-1] in self.eos_token_ids
        # Ids taken from config.json: kept with the copied files (see
        # `save_to_preset`).
        self._from_model_config = {}
        for role in _ROLES:
            if sources[role] == MODEL_CONFIG:
                ids = found[role]
                self._from_model_config[f"{role}_token_id"] = (
                    ids if len(ids) > 1 else ids[0]
                )

    def _flag(self, config, field, default):
        value = config.get(field, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ValueError(
                f"{self._where(TOKENIZER_CONFIG)}: `{field}` must be true "
                f"or false; received {value!r}."
            )
        return value

    @classmethod
    def from_preset(cls, directory):
        """Loads the tokenizer of a preset directory.

        Args:
            directory: str or path-like: ours, keras-hub's (its
                SentencePiece tokenizers) or a Hugging Face model
                directory. `tokenizer.json` is preferred when both it and
                `tokenizer.model` are present.

        Returns:
            A `Tokenizer`.

        Raises:
            FileNotFoundError: `directory` does not exist, or has no
                tokenizer file; the message names the files looked for.
            ValueError: a tokenizer file is invalid, or only files of a
                format not read here exist (named).

        Example:

        ```python
        import io
        import tempfile
        import sentencepiece as spm
        from keras_nlp.tokenizers import Tokenizer

        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(["the cat sat on the mat"] * 4),
            model_writer=model, vocab_size=20, hard_vocab_limit=False,
            minloglevel=2,
        )
        path = tempfile.mkdtemp()
        Tokenizer({"tokenizer.model": model.getvalue()}).save_to_preset(path)
        tokenizer = Tokenizer.from_preset(path)
        assert tokenizer.decode(tokenizer.encode("the mat")) == "the mat"
        ```
        """
        path = os.fspath(directory)
        files, why = _read_files(path)
        if why is not None:
            raise ValueError(why)
        if files is None:
            raise FileNotFoundError(
                f"No tokenizer in {path}: looked for {TOKENIZER_JSON} "
                f"(Hugging Face `tokenizers`), {SENTENCEPIECE_MODEL} "
                "(SentencePiece) and "
                f"{os.path.join(*KERAS_HUB_SENTENCEPIECE)} (keras-hub); "
                "found none."
            )
        return cls(files, source=path)

    # === Text and ids ===

    @property
    def special_token_ids(self):
        """The ids the files name as BOS, EOS or PAD (a frozenset)."""
        return self._special_ids

    @property
    def add_bos(self):
        return self._add_bos

    @property
    def add_eos(self):
        return self._add_eos

    def _sp_encode(self, text, add_special_tokens):
        ids = self._sp.encode(text)
        if add_special_tokens and self._add_bos:
            ids = [self.bos_token_id, *ids]
        if add_special_tokens and self._add_eos:
            ids = [*ids, self.eos_token_ids[0]]
        return ids

    def encode(self, text, add_special_tokens=True):
        """Token ids of a text, or of each text of a list; never padded.

        Args:
            text: a str, or a list (or tuple, or 1-D NumPy array) of str.
            add_special_tokens: bool, whether to add the special tokens of
                the tokenizer (see `add_bos` and `add_eos`).

        Returns:
            list of int for a str; a list of such lists for a list.
        """
        batch = self._text_batch(text)
        if batch is None:
            if self._hf is not None:
                return self._hf.encode(
                    text, add_special_tokens=add_special_tokens
                ).ids
            return self._sp_encode(text, add_special_tokens)
        if self._hf is not None:
            encodings = self._hf.encode_batch(
                batch, add_special_tokens=add_special_tokens
            )
            return [encoding.ids for encoding in encodings]
        return [self._sp_encode(item, add_special_tokens) for item in batch]

    @staticmethod
    def _text_batch(text):
        """None for one str; else the texts as a list of str."""
        if isinstance(text, str):
            return None
        if isinstance(text, np.ndarray) and text.ndim == 1:
            text = text.tolist()
        if isinstance(text, (list, tuple)):
            for index, item in enumerate(text):
                if not isinstance(item, str):
                    raise TypeError(
                        f"Text {index} of the batch is a "
                        f"{type(item).__name__} ({item!r}); every text "
                        "must be a str."
                    )
            return list(text)
        raise TypeError(
            "`text` must be a str or a list of str; received "
            f"{type(text).__name__}."
        )

    def _check_ids(self, ids, row=None):
        ids = np.asarray(ids)
        if ids.size == 0:
            return []
        if not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(
                f"Token ids must be integers; received dtype {ids.dtype}."
            )
        bad = (ids < 0) | (
            (ids >= self.vocabulary_size)
            & ~np.isin(ids, list(self._special_ids))
        )
        if bad.any():
            position = int(np.argmax(bad))
            where = f"row {row}, " if row is not None else ""
            raise ValueError(
                f"Token id {int(ids[position])} ({where}position "
                f"{position}) is outside the vocabulary: valid ids are 0 to "
                f"{self.vocabulary_size - 1}."
            )
        return ids.tolist()

    def _sp_decode(self, ids, skip_special_tokens):
        pieces, run = [], []
        for i in ids:
            special = i in self._special_ids or (
                i < self.vocabulary_size and self._sp.is_control(i)
            )
            if not special:
                run.append(i)
                continue
            if skip_special_tokens:
                continue
            if run:
                pieces.append(self._sp.decode(run))
                run = []
            if i < self.vocabulary_size:
                pieces.append(self._sp.id_to_piece(i))
            else:
                pieces.append(self._added_names.get(i, ""))
        if run:
            pieces.append(self._sp.decode(run))
        return "".join(pieces)

    def _decode_one(self, ids, skip_special_tokens, row=None):
        ids = self._check_ids(ids, row)
        if self._hf is not None:
            if skip_special_tokens:
                # Also those that the files name but tokenizer.json does
                # not mark special.
                ids = [i for i in ids if i not in self._special_ids]
            return self._hf.decode(ids, skip_special_tokens=skip_special_tokens)
        return self._sp_decode(ids, skip_special_tokens)

    def decode(self, ids, skip_special_tokens=True):
        """The text of token ids, or of each row of a batch of them.

        Args:
            ids: a list of int or a 1-D array; or a 2-D array, or a list
                of lists (rows may differ in length).
            skip_special_tokens: bool, whether to leave BOS, EOS, PAD (and
                the tokenizer's other special tokens) out of the text.

        Returns:
            str for one sequence; a list of str for a batch.

        Raises:
            ValueError: an id outside the vocabulary (named, with its
                position).
        """
        if isinstance(ids, (list, tuple)) and any(
            isinstance(row, (list, tuple, np.ndarray)) for row in ids
        ):
            return [
                self._decode_one(row, skip_special_tokens, index)
                for index, row in enumerate(ids)
            ]
        array = np.asarray(ids)
        if array.ndim == 2:
            return [
                self._decode_one(row, skip_special_tokens, index)
                for index, row in enumerate(array)
            ]
        if array.ndim > 2:
            raise ValueError(
                "`ids` must be 1-D (one sequence) or 2-D (a batch); "
                f"received shape {array.shape}."
            )
        return self._decode_one(array, skip_special_tokens)

    # === Saving ===

    def save_to_preset(self, directory):
        """Writes the tokenizer files it was loaded from into `directory`.

        Writes `tokenizer.json` or `tokenizer.model` and, where they were
        loaded, `tokenizer_config.json`, `special_tokens_map.json` and
        `generation_config.json`, each atomically; other tokenizer files
        already in `directory` (say the other format's model) are removed
        so that they cannot shadow these. `config.json` is never written.
        Special token ids that came from `config.json` are added to the
        written `generation_config.json`, so that a reload finds them.

        Args:
            directory: str or path-like; created if missing.
        """
        path = os.fspath(directory)
        os.makedirs(path, exist_ok=True)
        files = dict(self._files)
        if self._from_model_config:
            config = {}
            if GENERATION_CONFIG in files:
                config = _parse_json(
                    files[GENERATION_CONFIG], self._where(GENERATION_CONFIG)
                )
            for field, value in self._from_model_config.items():
                config.setdefault(field, value)
            files[GENERATION_CONFIG] = json.dumps(config, indent=2).encode()
        for name, data in files.items():
            write_file(path, name, data)
        for name in TOKENIZER_FILES:
            if name not in files:
                try:
                    os.remove(os.path.join(path, name))
                except FileNotFoundError:
                    pass

    def __repr__(self):
        return (
            f"Tokenizer({self._kind} from {self.source}, vocabulary_size="
            f"{self.vocabulary_size}, bos_token_id={self.bos_token_id}, "
            f"eos_token_ids={self.eos_token_ids}, pad_token_id="
            f"{self.pad_token_id})"
        )


__all__ = [
    "TOKENIZER_FILES",
    "Tokenizer",
    "find_tokenizer",
]
