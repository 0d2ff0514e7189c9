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

The encoder tasks (`TextClassifier`, `MaskedLM`) take a sample
preprocessor: anything callable as keras-hub's `TextClassifierPreprocessor`
and `MaskedLMPreprocessor` are, `preprocessor(x, y, sample_weight)` on raw
samples giving the model's input dict (or `(x, y)`, or `(x, y,
sample_weight)`): keras-hub's, or our `ClassifierPreprocessor`.
`TextInputsMixin` gives every task the `fit`, `evaluate` and `predict`
that apply its preprocessor to raw samples, as keras-hub's tasks do.
"""

import json
import os

import keras
import numpy as np

from keras_nlp.models.causal_lm_prompts import check_token_ids
from keras_nlp.models.task_checks import library_of

# What a packing preprocessor has; `tokenizer` names its special tokens.
PACKING_METHODS = ("generate_preprocess", "generate_postprocess", "tokenizer")


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


def is_sample_preprocessor(preprocessor):
    """Whether an encoder task can call `preprocessor` on raw samples:
    anything callable that is not one of our text tools (a `Tokenizer` is
    not callable; a `TextPreprocessor` pads causal LM text)."""
    return callable(preprocessor) and not hasattr(preprocessor, "for_training")


def preprocess_samples(
    preprocessor, x, y=None, sample_weight=None, input_names=None
):
    """Raw samples (text) made model inputs by a preprocessor.

    A `tf.data.Dataset` is mapped (the preprocessor's tensor path), or,
    for a preprocessor that `runs_on_host` (ours, Python), read batch by
    batch into a `keras.utils.PyDataset`. Other inputs are preprocessed at
    once and returned as NumPy arrays.

    Args:
        preprocessor: callable as `preprocessor(x, y, sample_weight)`.
        x, y, sample_weight: the samples.
        input_names: optional, the model's input names: other entries of
            the packed dict (`segment_ids` for a model without them) are
            dropped.

    Returns:
        `(x, y, sample_weight)`.
    """
    if _is_dataset(x):
        if getattr(preprocessor, "runs_on_host", False):
            batches = [
                _keep_inputs(_call_on_element(preprocessor, e), input_names)
                for e in x.as_numpy_iterator()
            ]
            return _Batches(batches), None, None
        x = x.map(preprocessor)
        if input_names is not None:
            x = x.map(lambda *parts: _keep_inputs(parts, input_names))
        # keras-hub's masks are bool: as int32, a dataset's batches trace
        # as the arrays of the NumPy path do.
        return x.map(_int_masks), None, None
    if isinstance(x, str):
        # One sample, as a batch of one (keras-hub packs a bare string
        # unbatched).
        x = [x]
    packed = preprocessor(x=x, y=y, sample_weight=sample_weight)
    packed = _keep_inputs(packed, input_names)
    if not isinstance(packed, tuple):
        packed = (packed,)
    packed = tuple(packed) + (None,) * (3 - len(packed))
    return tuple(_to_numpy(part) for part in packed[:3])


def _call_on_element(preprocessor, element):
    """`preprocessor` on one batch of a dataset, as `Dataset.map` calls it
    (a tuple element is spread over its arguments)."""
    if isinstance(element, tuple):
        return _to_numpy(preprocessor(*element))
    return _to_numpy(preprocessor(element))


def _keep_inputs(packed, input_names):
    """`packed` (`x` or a tuple starting with it) with only the model's
    inputs in `x`."""
    if input_names is None:
        return packed
    parts = packed if isinstance(packed, tuple) else (packed,)
    x = parts[0]
    if isinstance(x, dict):
        x = {name: value for name, value in x.items() if name in input_names}
    if len(parts) == 1:
        return x
    return (x, *parts[1:])


def _int_masks(*parts):
    import tensorflow as tf

    def cast(value):
        return tf.cast(value, "int32") if value.dtype == tf.bool else value

    parts = tf.nest.map_structure(cast, parts)
    return parts[0] if len(parts) == 1 else parts


class _Batches(keras.utils.PyDataset):
    """Batches already preprocessed on the host, replayed every epoch."""

    def __init__(self, batches):
        super().__init__()
        self._batches = batches

    def __len__(self):
        return len(self._batches)

    def __getitem__(self, index):
        return self._batches[index]


class TextInputsMixin:
    """`fit`, `evaluate` and `predict` that take raw samples (text, pairs
    of text columns, a `tf.data.Dataset` of them) when the task has a
    preprocessor for them, and apply it first, as keras-hub's tasks do.
    Token arrays and input dicts pass through unchanged.

    A task says which preprocessor applies by `_sample_preprocessor`
    (default: `self.preprocessor` where `is_sample_preprocessor`).
    """

    def _sample_preprocessor(self):
        preprocessor = getattr(self, "preprocessor", None)
        return preprocessor if is_sample_preprocessor(preprocessor) else None

    def _input_names(self):
        """The model's input names, or `None` to keep the packed dict
        whole."""
        return None

    def _preprocessed(self, x, y, sample_weight):
        preprocessor = self._sample_preprocessor()
        if preprocessor is None or not is_raw_samples(x):
            return x, y, sample_weight
        return preprocess_samples(
            preprocessor, x, y, sample_weight, self._input_names()
        )

    def fit(self, x=None, y=None, *args, sample_weight=None, **kwargs):
        x, y, sample_weight = self._preprocessed(x, y, sample_weight)
        return super().fit(x, y, *args, sample_weight=sample_weight, **kwargs)

    def evaluate(self, x=None, y=None, *args, sample_weight=None, **kwargs):
        x, y, sample_weight = self._preprocessed(x, y, sample_weight)
        return super().evaluate(
            x, y, *args, sample_weight=sample_weight, **kwargs
        )

    def predict(self, x, *args, **kwargs):
        x, _, _ = self._preprocessed(x, None, None)
        return super().predict(x, *args, **kwargs)


def is_raw_samples(x):
    """Whether training inputs `x` are raw text (or a dataset of it), for a
    packing preprocessor, rather than token arrays."""
    if _is_dataset(x):
        first = x.element_spec
        # The first leaf: the text of `text`, `(text, y)`, `((a, b), y)`.
        while isinstance(first, tuple) and first:
            first = first[0]
        return getattr(first, "dtype", None) is not None and (
            first.dtype.name == "string"
        )
    if is_text(x):
        return True
    if isinstance(x, tuple) and x and all(is_raw_samples(c) for c in x):
        # The text columns of pairs.
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
    if isinstance(value, tuple):
        return tuple(_to_numpy(part) for part in value)
    array = np.asarray(value)
    return array.astype("int32") if array.dtype == bool else array


# === What the generating tasks share: the preprocessor attribute, presets ===


class PreprocessorAttribute:
    """A task's `preprocessor`, kept as plain host-side state, and the
    `tokenizer` it implies (a mixin of `keras.Model`).

    A preprocessor (keras-hub's is a Keras layer) is not part of the
    model: it is set untracked, so Keras neither lists it as a layer nor
    saves it. Setting it sets `tokenizer` too (see `tokenizer_of`).
    """

    def __setattr__(self, name, value):
        if name == "preprocessor":
            object.__setattr__(self, name, value)
            return
        super().__setattr__(name, value)

    @property
    def preprocessor(self):
        """Ours (`Tokenizer` or `TextPreprocessor`), a packing preprocessor
        such as keras-hub's, or `None` (token ids only)."""
        return self.__dict__.get("_preprocessor")

    @preprocessor.setter
    def preprocessor(self, value):
        tokenizer = tokenizer_of(value, type(self).__name__)
        self.__dict__["_preprocessor"] = value
        self.tokenizer = tokenizer

    def _packer(self):
        """The task's packing preprocessor (keras-hub's kind), if any."""
        preprocessor = self.preprocessor
        return preprocessor if is_packing_preprocessor(preprocessor) else None

    def _pad_id(self):
        """The id that fills finished rows in `generate`: the packing
        preprocessor's or tokenizer's pad id, or 0."""
        if self._packer() is not None:
            return pad_token_id(self._packer())
        pad_id = getattr(self.tokenizer, "pad_token_id", None)
        return 0 if pad_id is None else int(pad_id)

    def _stop_ids(self, stop_token_ids):
        """`generate`'s `stop_token_ids` as a tuple of ids of the
        vocabulary: `"auto"` takes the packing preprocessor's end tokens,
        else the tokenizer's end-of-sequence ids (none without either)."""
        vocabulary = self.backbone.token_embedding.input_dim
        if isinstance(stop_token_ids, str):
            if stop_token_ids != "auto":
                raise ValueError(
                    "`stop_token_ids` must be 'auto', None or a list of "
                    f"ints. Received: {stop_token_ids!r}."
                )
            if self._packer() is not None:
                return tuple(
                    check_token_ids(
                        end_token_ids(self._packer()),
                        vocabulary,
                        lambda position: "the preprocessor's end token",
                    )
                )
            if self.tokenizer is None:
                return ()
            tokenizer = self.tokenizer
            ids = tokenizer.eos_token_ids
            return tuple(
                check_token_ids(
                    ids,
                    vocabulary,
                    lambda position: tokenizer.eos_token_source(ids[position]),
                    fix=" Correct the file, or pass `stop_token_ids` to "
                    "`generate`.",
                )
            )
        if stop_token_ids is None:
            return ()
        if np.ndim(stop_token_ids) == 0:
            stop_token_ids = [stop_token_ids]
        return tuple(
            check_token_ids(
                stop_token_ids,
                vocabulary,
                lambda position: f"`stop_token_ids`, position {position}",
            )
        )


def preset_tokenizer(preset):
    """The tokenizer of a preset directory (`find_tokenizer`), or `None`
    for a built-in preset name or a directory without one."""
    from keras_nlp.tokenizers import find_tokenizer

    if isinstance(preset, (str, os.PathLike)) and os.path.isdir(preset):
        return find_tokenizer(preset)
    return None


def preset_token_id(preset, field):
    """An id a Hugging Face preset names at the top of its
    `generation_config.json` or `config.json` (`decoder_start_token_id`,
    say), or `None` where neither file has it as an int (keras presets,
    built-in names). Symbolic links are not followed."""
    if not (isinstance(preset, (str, os.PathLike)) and os.path.isdir(preset)):
        return None
    for name in ("generation_config.json", "config.json"):
        path = os.path.join(os.fspath(preset), name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as file:
            try:
                data = json.load(file)
            except ValueError:
                continue
        value = data.get(field) if isinstance(data, dict) else None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def save_task_preset(task, preset_dir, **kwargs):
    """Saves a task's backbone (`Backbone.save_to_preset`) and its
    tokenizer's files beside it.

    With `format="huggingface"`, `config.json` holds the tokenizer's BOS,
    EOS and PAD ids (unless `token_ids` is given).

    Args:
        task: a model with `backbone` and `tokenizer` (or `None`).
        preset_dir: the directory.
        **kwargs: forwarded to the backbone's `save_to_preset`.
    """
    tokenizer = task.tokenizer
    if tokenizer is not None and kwargs.get("format") == "huggingface":
        eos = list(tokenizer.eos_token_ids)
        kwargs.setdefault(
            "token_ids",
            {
                "bos_token_id": tokenizer.bos_token_id,
                "eos_token_id": eos[0] if len(eos) == 1 else eos or None,
                "pad_token_id": tokenizer.pad_token_id,
            },
        )
    task.backbone.save_to_preset(preset_dir, **kwargs)
    if tokenizer is not None:
        tokenizer.save_to_preset(preset_dir)


def texts_of(values, single):
    """Strings of a preprocessor's detokenized output (a tensor, array or
    list of str or bytes): one str when `single`, else a list."""
    if hasattr(values, "numpy"):
        values = values.numpy()
    texts = [
        t.decode("utf-8") if isinstance(t, bytes) else str(t)
        for t in np.asarray(values, dtype=object).reshape(-1)
    ]
    return texts[0] if single else texts


def is_text_columns(x):
    """Whether `x` is a dict of text columns (a sequence-to-sequence
    task's raw samples: `{"encoder_text": [...], "decoder_text": [...]}`)."""
    return (
        isinstance(x, dict)
        and len(x) > 0
        and all(is_text(value) for value in x.values())
    )


def check_sample_preprocessor(task_name, preprocessor):
    """Raises unless `preprocessor` is `None` or callable on raw samples.

    Raises:
        ValueError: naming the object and what is accepted.
    """
    if preprocessor is None or is_sample_preprocessor(preprocessor):
        return
    raise ValueError(
        f"{task_name}'s `preprocessor` must pack text into the backbone's "
        "inputs when called as `preprocessor(x, y, sample_weight)`: a "
        "keras_nlp.tokenizers.ClassifierPreprocessor, or keras-hub's "
        "preprocessor of the task (e.g. keras_hub.models."
        "BertTextClassifierPreprocessor). Received: "
        f"{library_of(preprocessor)}."
    )
