"""Text to token ids and back, from a preset directory's tokenizer files.

Two formats, one interface: a Hugging Face `tokenizer.json` (read with the
`tokenizers` package) and a SentencePiece `tokenizer.model` (read with
`sentencepiece`). A keras-hub preset's SentencePiece tokenizer
(`assets/tokenizer/vocabulary.spm`) loads too. Each package is imported
only when a file needs it (`backends`). `tokenizer_files` finds and reads
the files; `special_tokens` says which files name BOS, EOS and PAD, in
which order.

The files are read whole when the tokenizer loads and kept, so
`save_to_preset` writes them as they were even if the source directory has
changed since.
"""

import json
import os
import warnings

import numpy as np

from keras_nlp.saving.preset_staging import write_file
from keras_nlp.tokenizers.backends import load_huggingface
from keras_nlp.tokenizers.backends import load_sentencepiece
from keras_nlp.tokenizers.backends import sentencepiece_decode
from keras_nlp.tokenizers.special_tokens import ID_FILES
from keras_nlp.tokenizers.special_tokens import TOKEN_FILES
from keras_nlp.tokenizers.special_tokens import configured_add_flags
from keras_nlp.tokenizers.special_tokens import resolve_special_tokens
from keras_nlp.tokenizers.tokenizer_files import GENERATION_CONFIG
from keras_nlp.tokenizers.tokenizer_files import KERAS_HUB_SENTENCEPIECE
from keras_nlp.tokenizers.tokenizer_files import MODEL_CONFIG
from keras_nlp.tokenizers.tokenizer_files import SENTENCEPIECE_MODEL
from keras_nlp.tokenizers.tokenizer_files import TOKENIZER_CONFIG
from keras_nlp.tokenizers.tokenizer_files import TOKENIZER_FILES
from keras_nlp.tokenizers.tokenizer_files import TOKENIZER_JSON
from keras_nlp.tokenizers.tokenizer_files import parse_json
from keras_nlp.tokenizers.tokenizer_files import read_tokenizer_files


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
    files, why = read_tokenizer_files(path)
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
    contents themselves. `keras_nlp.tokenizers.special_tokens` says where
    the special tokens come from.

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
            name: parse_json(files[name], self._where(name))
            for name in (*TOKEN_FILES, *ID_FILES)
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
        self._hf = self._sp = None
        if self._kind == TOKENIZER_JSON:
            self._hf = load_huggingface(data, self._where(TOKENIZER_JSON))
            self.vocabulary_size = self._hf.get_vocab_size(
                with_added_tokens=True
            )
        else:
            self._sp = load_sentencepiece(
                data, self._where(SENTENCEPIECE_MODEL)
            )
            self.vocabulary_size = self._sp.vocab_size()

    def _token_to_id(self, token):
        """The id of a token of the vocabulary, or None."""
        if self._hf is not None:
            return self._hf.token_to_id(token)
        piece = self._sp.piece_to_id(token)
        # SentencePiece maps unknown text to its unknown piece's id.
        return piece if self._sp.id_to_piece(piece) == token else None

    def _model_token_id(self, role):
        """SentencePiece's own id for a role (-1 there means none)."""
        if self._sp is None:
            return None
        own = getattr(self._sp, f"{role}_id")()
        return own if own >= 0 else None

    def _read_special_tokens(self, configs):
        special = resolve_special_tokens(
            configs,
            self._token_to_id,
            self._model_token_id,
            self._where,
            f"{self._kind} ({self.vocabulary_size} tokens)",
        )
        self.bos_token_id = special.bos_token_id
        self.eos_token_ids = special.eos_token_ids
        self.pad_token_id = special.pad_token_id
        self._special_ids = special.special_ids
        self._added_names = special.added_names
        self._eos_sources = special.eos_sources
        # Kept with the copied files (see `save_to_preset`).
        self._from_model_config = special.from_model_config
        self._read_add_flags(configs.get(TOKENIZER_CONFIG, {}))

    def _read_add_flags(self, tokenizer_config):
        """Whether `encode` adds BOS and EOS (see `add_bos`, `add_eos`)."""
        if self._sp is not None:
            self._add_bos, self._add_eos = configured_add_flags(
                tokenizer_config,
                self.bos_token_id,
                self.eos_token_ids,
                self._where(TOKENIZER_CONFIG),
            )
            return
        # The post-processor decides; an empty text shows what it adds.
        added = self._hf.encode("", add_special_tokens=True).ids
        self._add_bos = self.bos_token_id is not None and added[:1] == [
            self.bos_token_id
        ]
        self._add_eos = bool(added) and added[-1] in self.eos_token_ids

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
        files, why = read_tokenizer_files(path)
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

    def eos_token_source(self, token_id):
        """Where the files name an end-of-sequence id, for errors about it.

        Args:
            token_id: int, one of `eos_token_ids`.

        Returns:
            str: the file and its field, e.g.
            "/preset/generation_config.json `eos_token_id`".
        """
        name, field = self._eos_sources.get(token_id, (None, None))
        if name is None:
            return f"{self._where(self._kind)} (token id {token_id})"
        return f"{self._where(name)} `{field}`"

    @property
    def post_processor(self):
        """`tokenizer.json`'s `post_processor` object (a dict: how special
        tokens frame a text or a pair), or `None` (none, or SentencePiece).
        """
        if self._hf is None:
            return None
        data = parse_json(self._files[TOKENIZER_JSON], TOKENIZER_JSON)
        return data.get("post_processor")

    def token_to_id(self, token):
        """The id of a token of the vocabulary, or `None`."""
        return self._token_to_id(token)

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

    def _decode_one(self, ids, skip_special_tokens, row=None):
        ids = self._check_ids(ids, row)
        if self._hf is not None:
            if skip_special_tokens:
                # Also those that the files name but tokenizer.json does
                # not mark special.
                ids = [i for i in ids if i not in self._special_ids]
            return self._hf.decode(ids, skip_special_tokens=skip_special_tokens)
        return sentencepiece_decode(
            self._sp,
            ids,
            self._special_ids,
            self._added_names,
            skip_special_tokens,
        )

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
                config = parse_json(
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
    "Tokenizer",
    "find_tokenizer",
]
