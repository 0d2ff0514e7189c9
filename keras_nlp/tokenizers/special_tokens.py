"""Which ids are a tokenizer's BOS, EOS and PAD, from the files beside it.

Each of BOS, EOS and PAD is taken from the first of these files that names
it (a token in `tokenizer_config.json` and `special_tokens_map.json`, an
id in the others):

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
and without either, id 0. Only the source a role is taken from is checked:
a bad field that a file earlier in the list overrides is never read.
"""

import dataclasses

from keras_nlp.tokenizers.tokenizer_files import GENERATION_CONFIG
from keras_nlp.tokenizers.tokenizer_files import MODEL_CONFIG
from keras_nlp.tokenizers.tokenizer_files import SENTENCEPIECE_MODEL
from keras_nlp.tokenizers.tokenizer_files import SPECIAL_TOKENS_MAP
from keras_nlp.tokenizers.tokenizer_files import TOKENIZER_CONFIG

# Files that name special tokens by their text, and files that give ids.
TOKEN_FILES = (TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP)
ID_FILES = (GENERATION_CONFIG, MODEL_CONFIG)
ROLES = ("bos", "eos", "pad")


@dataclasses.dataclass(frozen=True)
class SpecialTokens:
    """The special tokens the files name.

    Attributes:
        bos_token_id: int or None.
        eos_token_ids: tuple of int, maybe empty, the tokenizer files' EOS
            first.
        pad_token_id: int: the PAD token, else the first EOS, else 0.
        special_ids: frozenset of every id named as BOS, EOS or PAD.
        added_names: dict, id -> text of `tokenizer_config.json`'s
            `added_tokens_decoder`.
        from_model_config: dict, `<role>_token_id` -> the id (or list of
            ids) of each role taken from `config.json`.
        eos_sources: dict, each EOS id -> `(file name, field)` naming it,
            for errors about an id that a model's vocabulary lacks.
    """

    bos_token_id: int | None
    eos_token_ids: tuple
    pad_token_id: int
    special_ids: frozenset
    added_names: dict
    from_model_config: dict
    eos_sources: dict


class _Sources:
    """Reads one role's ids from the files, in the order of the list above.

    Args:
        configs: dict, file name -> its JSON object, for the files among
            `TOKEN_FILES` and `ID_FILES` that exist.
        token_to_id: function, token text -> its id in the tokenizer's
            vocabulary, or None.
        model_token_id: function, role -> the tokenizer model's own id for
            it, or None (SentencePiece's `bos_id()`, ...).
        where: function, file name -> how errors name the file.
        vocabulary: str, the tokenizer as errors name it.
    """

    def __init__(self, configs, token_to_id, model_token_id, where, vocabulary):
        self.configs = configs
        self.token_to_id = token_to_id
        self.model_token_id = model_token_id
        self.where = where
        self.vocabulary = vocabulary
        self.added_tokens = {}
        decoder = configs.get(TOKENIZER_CONFIG, {}).get("added_tokens_decoder")
        for key, token in (decoder or {}).items():
            if isinstance(token, dict) and str(key).isdigit():
                self.added_tokens[token.get("content")] = int(key)

    def token_id(self, token, name, field):
        """The id of a special token named in a tokenizer file."""
        if isinstance(token, dict):
            token = token.get("content")
        if not isinstance(token, str):
            raise ValueError(
                f"{self.where(name)}: `{field}` must be a token string or "
                f"an object with a 'content' string; received {token!r}."
            )
        found = self.token_to_id(token)
        if found is None:
            found = self.added_tokens.get(token)
        if found is None:
            raise ValueError(
                f"{self.where(name)} names `{field}` {token!r}, which is "
                f"not a token of the {self.vocabulary} nor of "
                "`added_tokens_decoder`."
            )
        return found

    def config_ids(self, name, role):
        """The ids a config file gives by number for a role, as a list."""
        config = self.configs.get(name, {})
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
                    f"{self.where(name)}: `{field}` must be a non-negative "
                    f"integer{' or a list of them' if role == 'eos' else ''}"
                    f"; received {value!r}."
                )
        return list(values)

    def naming(self, role):
        """(file, field, ids) of every source naming a role, first ones
        first."""
        field = f"{role}_token"
        for name in TOKEN_FILES:
            token = self.configs.get(name, {}).get(field)
            if token is not None:
                yield name, field, [self.token_id(token, name, field)]
        for name in ID_FILES:
            ids = self.config_ids(name, role)
            if ids:
                yield name, f"{field}_id", ids
        own = self.model_token_id(role)
        if own is not None:
            yield SENTENCEPIECE_MODEL, f"{role}_id()", [own]

    def role_ids(self, role):
        """(ids, source file, {id: (file, field)}) of a role: the first
        source's ids; for EOS from a tokenizer file,
        `generation_config.json`'s stop ids too."""
        for name, field, ids in self.naming(role):
            sources = {i: (name, field) for i in ids}
            if role == "eos" and name in TOKEN_FILES:
                for i in self.config_ids(GENERATION_CONFIG, role):
                    sources.setdefault(
                        i, (GENERATION_CONFIG, f"{role}_token_id")
                    )
            return list(sources), name, sources
        return [], None, {}


def resolve_special_tokens(
    configs, token_to_id, model_token_id, where, vocabulary
):
    """The BOS, EOS and PAD ids that a tokenizer's files name.

    Args:
        configs: dict, file name -> its JSON object, for the files among
            `TOKEN_FILES` and `ID_FILES` that exist.
        token_to_id: function, token text -> its id in the tokenizer's
            vocabulary, or None.
        model_token_id: function, role (`"bos"`, `"eos"`, `"pad"`) -> the
            tokenizer model's own id for it, or None.
        where: function, file name -> how errors name the file.
        vocabulary: str, the tokenizer as errors name it, e.g.
            `"tokenizer.json (300 tokens)"`.

    Returns:
        A `SpecialTokens`.

    Raises:
        ValueError: a file names a token that is not in the vocabulary,
            or gives an id that is not a non-negative integer.
    """
    sources = _Sources(configs, token_to_id, model_token_id, where, vocabulary)
    found, source, named_by = {}, {}, {}
    for role in ROLES:
        found[role], source[role], named_by[role] = sources.role_ids(role)
    eos_token_ids = tuple(found["eos"])
    if found["pad"]:
        pad_token_id = found["pad"][0]
    elif eos_token_ids:
        pad_token_id = eos_token_ids[0]
    else:
        pad_token_id = 0
    # Ids taken from config.json: the tokenizer keeps them with its copied
    # files, as config.json itself is never copied.
    from_model_config = {
        f"{role}_token_id": ids if len(ids) > 1 else ids[0]
        for role, ids in found.items()
        if source[role] == MODEL_CONFIG
    }
    return SpecialTokens(
        bos_token_id=found["bos"][0] if found["bos"] else None,
        eos_token_ids=eos_token_ids,
        pad_token_id=pad_token_id,
        special_ids=frozenset([*found["bos"], *found["eos"], *found["pad"]]),
        added_names={i: token for token, i in sources.added_tokens.items()},
        from_model_config=from_model_config,
        eos_sources=named_by["eos"],
    )


def _flag(config, field, default, where):
    value = config.get(field, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValueError(
            f"{where}: `{field}` must be true or false; received {value!r}."
        )
    return value


def configured_add_flags(tokenizer_config, bos_token_id, eos_token_ids, where):
    """Whether a SentencePiece tokenizer adds BOS and EOS to encoded text.

    `tokenizer_config.json`'s `add_bos_token` (by default, whether a BOS
    token exists) and `add_eos_token` (by default not). A `tokenizer.json`
    needs none: its post-processor adds its special tokens itself.

    Args:
        tokenizer_config: dict, `tokenizer_config.json` (or `{}`).
        bos_token_id: int or None, the resolved BOS.
        eos_token_ids: tuple of int, the resolved stop tokens.
        where: str, `tokenizer_config.json` as errors name it.

    Returns:
        `(add_bos, add_eos)`, two bools.
    """
    has_bos = bos_token_id is not None
    add_bos = _flag(tokenizer_config, "add_bos_token", has_bos, where)
    add_eos = _flag(tokenizer_config, "add_eos_token", False, where)
    if add_bos and not has_bos:
        raise ValueError(
            f"{where} sets add_bos_token but no file names a BOS token."
        )
    if add_eos and not eos_token_ids:
        raise ValueError(
            f"{where} sets add_eos_token but no file names an EOS token."
        )
    return add_bos, add_eos
