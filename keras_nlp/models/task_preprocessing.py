"""The preprocessors a task accepts, by what they do rather than their class.

A task (`CausalLM`) takes either of two kinds of preprocessor:

- ours: a `keras_nlp.tokenizers.Tokenizer`, or a `TextPreprocessor` that
  holds one; the task encodes and decodes text with the tokenizer;
- a packing preprocessor, as keras-hub's `XCausalLMPreprocessor` objects
  are: `generate_preprocess(texts, sequence_length)` packs prompts into
  `{"token_ids", "padding_mask"}`, `generate_postprocess(outputs)` turns
  generated ids back into text, calling it on raw training data gives
  `(x, y, sample_weight)`, and its `tokenizer` names the end and padding
  tokens (`end_token_id`, `pad_token_id`).

The second kind is recognised by those methods, never by importing
keras-hub, so this library has no runtime dependency on it and a user's
keras-hub preprocessing runs unchanged (its own packing, its own special
tokens, its own text clean-up).
"""

import numpy as np

# What a packing preprocessor has; `tokenizer` names its special tokens.
PACKING_METHODS = ("generate_preprocess", "generate_postprocess", "tokenizer")


def library_of(obj):
    """`"keras_hub.models.LlamaBackbone"`-like name of an object's class,
    with the library it comes from, for errors about wrong objects."""
    cls = type(obj)
    library = cls.__module__.split(".")[0]
    if library in ("keras_hub", "keras_nlp"):
        return f"{library}.models.{cls.__name__}"
    return f"{cls.__module__}.{cls.__name__}"


def is_packing_preprocessor(preprocessor):
    """Whether `preprocessor` packs text itself (keras-hub's protocol)."""
    return all(hasattr(preprocessor, name) for name in PACKING_METHODS)


def tokenizer_of(preprocessor, task_name):
    """The tokenizer a task encodes text with, from its `preprocessor`.

    Args:
        preprocessor: `None`, one of ours (`Tokenizer` or
            `TextPreprocessor`), or a packing preprocessor.
        task_name: the task's class name, for the error.

    Returns:
        Our `Tokenizer`, or `None` (no preprocessor, or a packing one,
        which does its own tokenizing).

    Raises:
        ValueError: for anything else, naming what is accepted.
    """
    if preprocessor is None or is_packing_preprocessor(preprocessor):
        return None
    tokenizer = getattr(preprocessor, "tokenizer", preprocessor)
    if hasattr(tokenizer, "encode") and hasattr(tokenizer, "eos_token_ids"):
        return tokenizer
    raise ValueError(
        f"{task_name}'s `preprocessor` must be a keras_nlp.tokenizers."
        "Tokenizer or TextPreprocessor, or a preprocessor that packs text "
        "itself (with `generate_preprocess`, `generate_postprocess` and a "
        "`tokenizer`, as keras_hub.models.LlamaCausalLMPreprocessor has). "
        f"Received: {library_of(preprocessor)}."
    )


def end_token_ids(preprocessor):
    """The stop ids a packing preprocessor's tokenizer names: its end
    token, and a second one where it has one (Gemma 3's end of turn)."""
    tokenizer = preprocessor.tokenizer
    ids = []
    for name in ("end_token_id", "end_token2_id"):
        value = getattr(tokenizer, name, None)
        if value is not None:
            ids.append(int(value))
    return tuple(ids)


def pad_token_id(preprocessor):
    """A packing preprocessor's padding id (0 where it names none)."""
    value = getattr(preprocessor.tokenizer, "pad_token_id", None)
    return 0 if value is None else int(value)


def is_text(inputs):
    """Whether `generate`'s inputs are text: a string or a list of them."""
    if isinstance(inputs, str):
        return True
    return (
        isinstance(inputs, (list, tuple))
        and len(inputs) > 0
        and all(isinstance(x, str) for x in inputs)
    )


def pack_prompts(preprocessor, texts, max_length):
    """Prompts packed by `preprocessor`, as NumPy arrays.

    Args:
        preprocessor: a packing preprocessor.
        texts: list of str.
        max_length: int or None: the packed width (None: the
            preprocessor's `sequence_length`).

    Returns:
        dict of NumPy `token_ids` (int32) and `padding_mask` (int32).
    """
    packed = preprocessor.generate_preprocess(texts, sequence_length=max_length)
    return {
        "token_ids": np.asarray(packed["token_ids"]).astype("int32"),
        "padding_mask": np.asarray(packed["padding_mask"]).astype("int32"),
    }


def unpack_text(preprocessor, outputs, single):
    """`generate`'s token outputs as text, by `preprocessor`'s own
    post-processing: a str for a single prompt, else a list of str."""
    # keras-hub's post-processing indexes with the mask: it must be bool,
    # as its own `generate` returns it.
    texts = preprocessor.generate_postprocess(
        {
            "token_ids": outputs["token_ids"],
            "padding_mask": np.asarray(outputs["padding_mask"]).astype(bool),
        }
    )
    if hasattr(texts, "numpy"):
        texts = texts.numpy()
    texts = [
        t.decode("utf-8") if isinstance(t, bytes) else str(t)
        for t in np.asarray(texts, dtype=object).reshape(-1)
    ]
    return texts[0] if single else texts


def preprocess_samples(preprocessor, x, y=None, sample_weight=None):
    """Raw samples (text) made model inputs by a packing preprocessor.

    A `tf.data.Dataset` is mapped (the preprocessor's tensor path); other
    inputs are preprocessed at once and returned as NumPy arrays.

    Returns:
        `(x, y, sample_weight)`.
    """
    if _is_dataset(x):
        return x.map(preprocessor), None, None
    packed = preprocessor(x, y=y, sample_weight=sample_weight)
    if not isinstance(packed, tuple):
        packed = (packed,)
    packed = tuple(packed) + (None,) * (3 - len(packed))
    return tuple(_to_numpy(part) for part in packed[:3])


def is_raw_samples(x):
    """Whether training inputs `x` are raw text (or a dataset of it), for a
    packing preprocessor, rather than token arrays."""
    if _is_dataset(x):
        spec = x.element_spec
        first = spec[0] if isinstance(spec, tuple) else spec
        return getattr(first, "dtype", None) is not None and (
            first.dtype.name == "string"
        )
    if is_text(x):
        return True
    array = np.asarray(x) if not isinstance(x, dict) else None
    return array is not None and array.dtype.kind in ("U", "S", "O")


def _is_dataset(x):
    return type(x).__module__.startswith("tensorflow") and hasattr(
        x, "element_spec"
    )


def _to_numpy(value):
    if value is None:
        return None
    if isinstance(value, dict):
        return {key: _to_numpy(part) for key, part in value.items()}
    array = np.asarray(value)
    return array.astype("int32") if array.dtype == bool else array
