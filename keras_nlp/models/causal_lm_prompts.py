"""What `CausalLM.generate` does on the host, before and after its loop.

Prompts arrive as text, lists of token ids, an int array or a dict with a
`padding_mask`; they leave as one left-padded batch of fixed shape, which
is what the compiled loop takes. The loop's output is then unpacked into
each row's tokens followed by padding. None of this touches the model, so
it is NumPy on plain arrays, apart from the tokenizer that encodes text.
"""

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Prompts:
    """Prompts as lists of token ids, and the form they came in.

    Attributes:
        ids: one list of ints per row, each non-empty.
        is_text: whether they were strings (so `generate` returns text).
        single: whether that was one string rather than a list.
        width: the width of a `token_ids` input, else `None`.
    """

    ids: list
    is_text: bool = False
    single: bool = False
    width: int | None = None


@dataclasses.dataclass(frozen=True)
class PaddedBatch:
    """Prompts left-padded into the arrays of the generation loop.

    Attributes:
        token_ids: int32 `(batch, total)`: each prompt ends at slot
            `prompt_length`, the padding id fills the rest.
        prompt_mask: int32 `(batch, prompt_length)`: 1 on the prompts.
        slot_limits: int32 `(batch,)`: the slot at which each row is done.
    """

    token_ids: np.ndarray
    prompt_mask: np.ndarray
    slot_limits: np.ndarray


def read_prompts(inputs, tokenizer, model_name, vocabulary_size):
    """The `Prompts` of any input `generate` accepts.

    Args:
        inputs: `generate`'s `inputs`.
        tokenizer: the model's tokenizer, or `None` (text is refused).
        model_name: the model's class name, for the error without one.
        vocabulary_size: int, the model's vocabulary: every prompt id
            must be an integer below it (`check_token_ids`).
    """
    if isinstance(inputs, str) or (
        isinstance(inputs, (list, tuple))
        and inputs
        and all(isinstance(x, str) for x in inputs)
    ):
        if tokenizer is None:
            raise ValueError(
                "Text prompts need a tokenizer, and this "
                f"{model_name} has none (its preset directory "
                "had no tokenizer.json or tokenizer.model). Pass token "
                "ids, or `tokenizer=` when building the model."
            )
        single = isinstance(inputs, str)
        texts = [inputs] if single else list(inputs)
        ids = [list(tokenizer.encode(text)) for text in texts]
        return Prompts(
            _check_prompts(ids, vocabulary_size), is_text=True, single=single
        )
    if isinstance(inputs, dict):
        if "token_ids" not in inputs:
            raise ValueError(
                "A dict of prompts needs `token_ids` (and optionally "
                f"`padding_mask`). Received keys: {sorted(inputs)}."
            )
        token_ids = np.asarray(inputs["token_ids"])
        mask = inputs.get("padding_mask")
        mask = np.ones_like(token_ids) if mask is None else np.asarray(mask)
        return Prompts(
            _unpad(token_ids, mask, vocabulary_size),
            width=token_ids.shape[1],
        )
    if isinstance(inputs, (list, tuple)) and all(
        isinstance(row, (list, tuple, np.ndarray)) for row in inputs
    ):
        return Prompts(_check_prompts(inputs, vocabulary_size))
    array = np.asarray(inputs)
    if array.ndim == 2 and np.issubdtype(array.dtype, np.integer):
        return Prompts(_unpad(array, np.ones_like(array), vocabulary_size))
    raise ValueError(
        "`generate` takes a string or list of strings, a list of token "
        "id lists, a 2D int array, or a dict with `token_ids` and "
        f"`padding_mask`. Received: {type(inputs).__name__}."
    )


def row_limits(prompts, max_length, max_new_tokens):
    """The length each row may reach, prompt included.

    Args:
        prompts: `Prompts`.
        max_length, max_new_tokens: as `generate`'s; `max_length` defaults
            to the width of a `token_ids` input.
    """
    if max_length is not None and max_new_tokens is not None:
        raise ValueError(
            "Pass `max_length` or `max_new_tokens`, not both. Received: "
            f"max_length={max_length}, max_new_tokens={max_new_tokens}."
        )
    for name, value in (
        ("max_length", max_length),
        ("max_new_tokens", max_new_tokens),
    ):
        if value is not None and (
            not isinstance(value, (int, np.integer))
            or isinstance(value, bool)
            or value < 1
        ):
            raise ValueError(
                f"`{name}` must be a positive integer. Received: "
                f"{name}={value!r}."
            )
    if max_new_tokens is not None:
        return [len(prompt) + max_new_tokens for prompt in prompts.ids]
    if max_length is None:
        max_length = prompts.width
    if max_length is None:
        raise ValueError(
            "Pass `max_length` (the length a row may reach, prompt "
            "included) or `max_new_tokens` for prompts given as lists "
            "or text."
        )
    longest = max(len(prompt) for prompt in prompts.ids)
    if longest >= max_length:
        raise ValueError(
            f"A prompt of {longest} tokens leaves nothing to generate "
            f"within max_length={max_length}. Pass a larger "
            "`max_length` or use `max_new_tokens`."
        )
    return [max_length for _ in prompts.ids]


def batch_width(prompts, limits):
    """The slots of the left-padded batch (and of its caches): the longest
    prompt plus the most tokens any row may add, so that every row fits
    its continuation."""
    most_new = max(
        limit - len(prompt)
        for limit, prompt in zip(limits, prompts, strict=True)
    )
    return max(len(prompt) for prompt in prompts) + most_new


def left_pad(prompts, limits, pad_id):
    """The `PaddedBatch` of prompts (lists of ids) and their row limits,
    `batch_width(prompts, limits)` slots wide."""
    prompt_length = max(len(prompt) for prompt in prompts)
    batch_size = len(prompts)
    width = batch_width(prompts, limits)
    token_ids = np.full((batch_size, width), pad_id, "int32")
    prompt_mask = np.zeros((batch_size, prompt_length), "int32")
    slot_limits = np.zeros((batch_size,), "int32")
    for row, (prompt, limit) in enumerate(zip(prompts, limits, strict=True)):
        start = prompt_length - len(prompt)
        token_ids[row, start:prompt_length] = prompt
        prompt_mask[row, start:] = 1
        slot_limits[row] = start + limit
    return PaddedBatch(token_ids, prompt_mask, slot_limits)


def unpack_rows(tokens, written, prompts, limits, pad_id, strip_prompt):
    """Each row's tokens moved to its start, then padding.

    Args:
        tokens: int `(batch, total)`, the loop's token ids.
        written: bool `(batch, total)`, the slots holding a row's prompt
            or one of its generated tokens.
        prompts: the prompts (lists of ids).
        limits: the length each row may reach (`row_limits`).
        pad_id: the id after each row's tokens.
        strip_prompt: keep only the generated tokens.

    Returns:
        `(token_ids, padding_mask)`, int32 `(batch, max(limits))`.
    """
    width = max(limits)
    out_tokens = np.full((len(prompts), width), pad_id, "int32")
    out_mask = np.zeros((len(prompts), width), "int32")
    for row, prompt in enumerate(prompts):
        kept = tokens[row][written[row]]
        if strip_prompt:
            kept = kept[len(prompt) :]
        out_tokens[row, : len(kept)] = kept
        out_mask[row, : len(kept)] = 1
    return out_tokens, out_mask


def check_token_ids(ids, vocabulary_size, where, fix=""):
    """`ids` as a list of Python ints, each in `[0, vocabulary_size)`.

    The one check of every token id `generate` takes: the prompts', the
    explicit stop ids' and those a tokenizer's files name. Only integers
    pass: a float or a string is an error, never rounded or parsed.

    Args:
        ids: a sequence or 1-D array of token ids.
        vocabulary_size: int, the model's vocabulary.
        where: function, position -> how the error names the id at that
            position (`"Prompt 0, position 3"`).
        fix: str, a sentence the error ends with (what to change).

    Returns:
        The ids, a list of int.

    Raises:
        ValueError: naming the first bad id, its position and the valid
            range.
    """
    if not isinstance(ids, np.ndarray):
        values = list(ids)
    elif np.issubdtype(ids.dtype, np.integer):
        values = ids.reshape(-1).tolist()
    else:
        # Checked one by one below, so that the error names the first.
        values = list(ids.reshape(-1))
    for position, value in enumerate(values):
        if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, np.integer)
        ):
            shown = repr(str(value)) if isinstance(value, str) else value
            raise ValueError(
                f"{where(position)}: token ids must be integers; received "
                f"{shown} ({type(value).__name__}).{fix}"
            )
        if not 0 <= value < vocabulary_size:
            raise ValueError(
                f"{where(position)}: token id {value} is outside the "
                f"vocabulary; valid ids are 0 to {vocabulary_size - 1} "
                f"(vocabulary_size={vocabulary_size}).{fix}"
            )
    return [int(value) for value in values]


def _check_prompts(prompts, vocabulary_size):
    """Lists of ids -> list of int lists; refuses empty prompts and ids
    that are not integers of the vocabulary."""
    checked = []
    for index, prompt in enumerate(prompts):
        ids = check_token_ids(
            prompt,
            vocabulary_size,
            lambda position, index=index: (
                f"Prompt {index}, position {position}"
            ),
        )
        if not ids:
            raise ValueError(
                f"Prompt {index} is empty; every prompt needs at least one "
                "token (a start token, for instance)."
            )
        checked.append(ids)
    if not checked:
        raise ValueError("`generate` received no prompts.")
    return checked


def _unpad(token_ids, padding_mask, vocabulary_size):
    """Each row's real tokens, which must be one contiguous run."""
    if token_ids.ndim != 2 or token_ids.shape != padding_mask.shape:
        raise ValueError(
            "`token_ids` and `padding_mask` must be 2D and of one shape. "
            f"Received: {token_ids.shape} and {padding_mask.shape}."
        )
    prompts = []
    rows = zip(token_ids, padding_mask.astype(bool), strict=True)
    for row, (ids, mask) in enumerate(rows):
        real = np.flatnonzero(mask)
        if real.size and real[-1] - real[0] + 1 != real.size:
            raise ValueError(
                f"Row {row} of `padding_mask` has padding between real "
                "tokens; pad each prompt on the left or the right only. "
                f"Received: {mask.astype(int).tolist()}."
            )
        prompts.append(ids[real])
    return _check_prompts(prompts, vocabulary_size)
