"""Batches of text as padded token ids: prompts for generation, text to
train on, and generated ids back to text."""

import numpy as np


def _check_length(value, name, allow_none):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(
            f"`{name}` must be a positive integer"
            f"{' or None' if allow_none else ''}; received {value!r}."
        )
    if value < 1:
        raise ValueError(
            f"`{name}` must be a positive integer; received {value}."
        )
    return int(value)


class TextPreprocessor:
    """Turns text into padded token ids for a causal LM, and ids into text.

    A small host-side object around a `keras_nlp.tokenizers.Tokenizer`.
    Prompts for generation are padded on the left, so that every prompt
    ends at the last position and generation continues all of them from
    there; text to train on is padded on the right, with EOS appended.
    Nothing is truncated: a text longer than the sequence length is an
    error.

    Args:
        tokenizer: a `keras_nlp.tokenizers.Tokenizer`.
        sequence_length: int or None, the length of prompt batches. None
            pads each batch to its longest prompt.

    Example:

    ```python
    import io
    import sentencepiece as spm
    from keras_nlp.tokenizers import TextPreprocessor
    from keras_nlp.tokenizers import Tokenizer

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["the cat sat on the mat"] * 4),
        model_writer=model, vocab_size=20, hard_vocab_limit=False,
        minloglevel=2,
    )
    tokenizer = Tokenizer({"tokenizer.model": model.getvalue()})
    preprocessor = TextPreprocessor(tokenizer)
    batch = preprocessor(["the cat sat on the mat", "the mat"])
    assert batch["token_ids"].shape == batch["padding_mask"].shape
    assert batch["padding_mask"][1, 0] == 0  # Left-padded.
    assert preprocessor.decode(**batch) == ["the cat sat on the mat", "the mat"]
    ```
    """

    def __init__(self, tokenizer, sequence_length=None):
        for attribute in ("encode", "decode", "pad_token_id", "eos_token_ids"):
            if not hasattr(tokenizer, attribute):
                raise TypeError(
                    "`tokenizer` must be a keras_nlp.tokenizers.Tokenizer; "
                    f"received {type(tokenizer).__name__}, which has no "
                    f"`{attribute}`."
                )
        self.tokenizer = tokenizer
        self.sequence_length = _check_length(
            sequence_length, "sequence_length", allow_none=True
        )

    def get_config(self):
        """The constructor's arguments but the tokenizer.

        The tokenizer is not a config: it travels as its files
        (`Tokenizer.save_to_preset`), and `from_config` takes it again.
        """
        return {"sequence_length": self.sequence_length}

    @classmethod
    def from_config(cls, config, tokenizer):
        return cls(tokenizer, **config)

    def _encode(self, texts):
        if isinstance(texts, str):
            texts = [texts]
        if isinstance(texts, (list, tuple)) and not texts:
            raise ValueError("Received an empty batch of texts.")
        return self.tokenizer.encode(texts)

    @staticmethod
    def _check_fits(ids, length, what):
        too_long = [i for i, row in enumerate(ids) if len(row) > length]
        if too_long:
            first = too_long[0]
            others = (
                f" ({len(too_long) - 1} more are too)"
                if len(too_long) > 1
                else ""
            )
            raise ValueError(
                f"{what} {first} is {len(ids[first])} tokens long, longer "
                f"than sequence_length={length}{others}. Shorten it or pass "
                "a larger sequence_length; text is never truncated."
            )

    def __call__(self, texts):
        """Prompts as left-padded token ids.

        Args:
            texts: a str (a batch of one) or a list of str.

        Returns:
            dict of NumPy int32 arrays of shape `(batch, length)`:
            `token_ids` (the tokenizer's special tokens added, padded with
            `tokenizer.pad_token_id` on the left) and `padding_mask` (1 on
            tokens of the prompt, 0 on padding). `length` is
            `sequence_length`, or the longest prompt's when it is None.

        Raises:
            ValueError: a prompt is longer than `sequence_length`, or
                encodes to no token at all.
        """
        ids = self._encode(texts)
        for index, row in enumerate(ids):
            if not row:
                raise ValueError(
                    f"Prompt {index} encodes to no token (the tokenizer "
                    "adds no BOS): generation needs at least one token to "
                    "continue from."
                )
        length = self.sequence_length or max(len(row) for row in ids)
        self._check_fits(ids, length, "Prompt")
        token_ids = np.full(
            (len(ids), length), self.tokenizer.pad_token_id, np.int32
        )
        padding_mask = np.zeros((len(ids), length), np.int32)
        for index, row in enumerate(ids):
            token_ids[index, length - len(row) :] = row
            padding_mask[index, length - len(row) :] = 1
        return {"token_ids": token_ids, "padding_mask": padding_mask}

    def for_training(self, texts, sequence_length):
        """Text to train on as right-padded token ids, EOS appended.

        Args:
            texts: a str or a list of str.
            sequence_length: int, the length of the batch.

        Returns:
            dict of NumPy int32 arrays of shape `(batch, sequence_length)`:
            `token_ids` (each text's ids, then the tokenizer's first EOS
            unless it has none or already ended the text, then padding)
            and `padding_mask` (1 on those tokens, 0 on padding). Labels
            are the ids shifted by one; the model's loss does the shift.

        Raises:
            ValueError: a text with its EOS is longer than
                `sequence_length`.
        """
        sequence_length = _check_length(
            sequence_length, "sequence_length", allow_none=False
        )
        ids = self._encode(texts)
        eos_ids = self.tokenizer.eos_token_ids
        if eos_ids:
            ids = [
                row if row and row[-1] in eos_ids else [*row, eos_ids[0]]
                for row in ids
            ]
        self._check_fits(ids, sequence_length, "Text")
        shape = (len(ids), sequence_length)
        token_ids = np.full(shape, self.tokenizer.pad_token_id, np.int32)
        padding_mask = np.zeros(shape, np.int32)
        for index, row in enumerate(ids):
            token_ids[index, : len(row)] = row
            padding_mask[index, : len(row)] = 1
        return {"token_ids": token_ids, "padding_mask": padding_mask}

    def decode(self, token_ids, padding_mask=None):
        """Token ids back to text, one str per row.

        Args:
            token_ids: int array (or nested list) of shape
                `(batch, length)`; one 1-D row is a batch of one.
            padding_mask: array of the same shape, or None. Where given,
                positions where it is 0 are left out. Where not, runs of
                `tokenizer.pad_token_id` at either end of a row are.

        Returns:
            list of str. Special tokens (BOS, EOS, PAD, ...) are left out.
        """
        token_ids = np.asarray(token_ids)
        if token_ids.ndim == 1:
            token_ids = token_ids[None]
            if padding_mask is not None:
                padding_mask = np.asarray(padding_mask)[None]
        if token_ids.ndim != 2:
            raise ValueError(
                "`token_ids` must have shape (batch, length); received shape "
                f"{token_ids.shape}."
            )
        if padding_mask is not None:
            padding_mask = np.asarray(padding_mask)
            if padding_mask.shape != token_ids.shape:
                raise ValueError(
                    f"`padding_mask` has shape {padding_mask.shape}; it must "
                    f"match `token_ids`' shape {token_ids.shape}."
                )
            rows = [
                ids[mask != 0]
                for ids, mask in zip(token_ids, padding_mask, strict=True)
            ]
        else:
            pad = self.tokenizer.pad_token_id
            rows = []
            for ids in token_ids:
                real = np.flatnonzero(ids != pad)
                rows.append(
                    ids[real[0] : real[-1] + 1] if real.size else ids[:0]
                )
        return [self.tokenizer.decode(row) for row in rows]
