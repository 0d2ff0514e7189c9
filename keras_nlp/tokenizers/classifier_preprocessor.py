"""Text columns packed into a classifier's inputs by our `Tokenizer`.

`ClassifierPreprocessor` takes one text column (a batch of str) or two
(pairs: a tuple of two batches) and packs each row as the tokenizer's own
post-processor lays out a sequence or a pair: BERT's `[CLS] a [SEP] b
[SEP]` (the second text and its `[SEP]` in segment 1), RoBERTa's `<s> a
</s></s> b </s>`, or whatever `tokenizer.json`'s `TemplateProcessing`
says. Texts too long for `sequence_length` are cut as keras-hub cuts them:

- `"round_robin"`: one token at a time from each text in turn, the first
  text first, until the room left after the special tokens is full;
- `"waterfall"`: the first text as far as the room allows, the second one
  in what is left.

Its calls take and return what keras-hub's `TextClassifierPreprocessor`
takes and returns (`x`, `(x, y)` or `(x, y, sample_weight)`), so a
`TextClassifier` applies it in `fit`, `evaluate` and `predict` on text.
It runs on the host (Python, never traced).
"""

import numpy as np

TRUNCATIONS = ("round_robin", "waterfall")
# Where a template puts the first and the second text.
FIRST, SECOND = "A", "B"


def packing_templates(post_processor, token_to_id):
    """The single and pair layouts of a `tokenizer.json` post-processor.

    Args:
        post_processor: dict, `tokenizer.json`'s `post_processor` object.
        token_to_id: function, token text -> id (for `BertProcessing`'s
            and `RobertaProcessing`'s named tokens).

    Returns:
        `(single, pair)`: each a list of `(item, segment)` where `item` is
        a special token's id (int) or `"A"` / `"B"`, the texts; `None` when
        the post-processor adds no special tokens (ByteLevel alone).

    Raises:
        ValueError: a post-processor type not read here (named).
    """
    kind = post_processor.get("type")
    if kind == "Sequence":
        found = [
            packing_templates(step, token_to_id)
            for step in post_processor.get("processors", [])
        ]
        found = [layout for layout in found if layout is not None]
        return found[-1] if found else None
    if kind in ("BertProcessing", "RobertaProcessing"):
        cls_id = post_processor["cls"][1]
        sep_id = post_processor["sep"][1]
        if kind == "BertProcessing":
            single = [(cls_id, 0), (FIRST, 0), (sep_id, 0)]
            return single, single + [(SECOND, 1), (sep_id, 1)]
        single = [(cls_id, 0), (FIRST, 0), (sep_id, 0)]
        return single, single + [(sep_id, 0), (SECOND, 0), (sep_id, 0)]
    if kind == "TemplateProcessing":
        specials = post_processor.get("special_tokens", {})
        return tuple(
            _template(post_processor[key], specials)
            for key in ("single", "pair")
        )
    if kind in ("ByteLevel", None):
        return None
    raise ValueError(
        f"tokenizer.json's post-processor {kind!r} is not read here: "
        "expected TemplateProcessing, BertProcessing, RobertaProcessing, "
        "or a Sequence holding one."
    )


def _template(pieces, specials):
    layout = []
    for piece in pieces:
        if "Sequence" in piece:
            layout.append(
                (piece["Sequence"]["id"], piece["Sequence"]["type_id"])
            )
            continue
        token = piece["SpecialToken"]
        for token_id in specials[token["id"]]["ids"]:
            layout.append((token_id, token["type_id"]))
    return layout


def kept_lengths(lengths, room, truncate):
    """How many tokens of each text fit in `room`, cut by `truncate`.

    Args:
        lengths: list of int, each text's token count.
        room: int, the positions left after the special tokens.
        truncate: `"round_robin"` or `"waterfall"` (see the module).

    Returns:
        list of int.
    """
    if sum(lengths) <= room:
        return list(lengths)
    if truncate == "waterfall":
        kept = []
        for length in lengths:
            kept.append(min(length, room))
            room -= kept[-1]
        return kept
    kept = [0] * len(lengths)
    while room > 0:
        for index, length in enumerate(lengths):
            if room > 0 and kept[index] < length:
                kept[index] += 1
                room -= 1
    return kept


class ClassifierPreprocessor:
    """Packs one or two text columns into a classifier's inputs.

    Each row becomes `token_ids`, `segment_ids` and `padding_mask` (int32,
    `(batch, sequence_length)`), laid out by the tokenizer's
    `tokenizer.json` post-processor (see the module) and padded on the
    right with the tokenizer's `pad_token_id`. Use it as a
    `TextClassifier`'s `preprocessor`: `fit`, `evaluate` and `predict` then
    take text.

    Args:
        tokenizer: a `keras_nlp.tokenizers.Tokenizer` read from a
            `tokenizer.json` with a post-processor that adds special
            tokens.
        sequence_length: int, the packed width.
        truncate: `"round_robin"` or `"waterfall"`, how texts too long
            for `sequence_length` are cut.

    Call arguments:
        x: a str, a list (or 1-D array) of str, or a tuple of one or two
            such batches (the columns of a pair).
        y: optional labels, returned as given.
        sample_weight: optional, returned as given.

    Returns:
        The inputs dict, or `(x, y)`, or `(x, y, sample_weight)`, as
        `keras.utils.pack_x_y_sample_weight` packs them.

    Example:

    ```python
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers, processors
    from keras_nlp.tokenizers import ClassifierPreprocessor, Tokenizer

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat"]
    hf = HFTokenizer(models.WordPiece(
        {w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    tokenizer = Tokenizer({"tokenizer.json": hf.to_str().encode()})
    preprocessor = ClassifierPreprocessor(tokenizer, sequence_length=6)
    packed = preprocessor((["the cat sat"], ["cat"]))
    packed["token_ids"].tolist()  # [[2, 4, 5, 3, 5, 3]]: "sat" was cut
    packed["segment_ids"].tolist()  # [[0, 0, 0, 0, 1, 1]]
    ```
    """

    # Python on the host: a `tf.data` pipeline is read, not mapped.
    runs_on_host = True

    def __init__(self, tokenizer, sequence_length=512, truncate="round_robin"):
        if not (
            isinstance(sequence_length, int)
            and not isinstance(sequence_length, bool)
            and sequence_length > 0
        ):
            raise ValueError(
                "sequence_length must be a positive integer. Received: "
                f"sequence_length={sequence_length!r}."
            )
        if truncate not in TRUNCATIONS:
            raise ValueError(
                f"truncate must be one of {TRUNCATIONS}. Received: "
                f"truncate={truncate!r}."
            )
        post_processor = getattr(tokenizer, "post_processor", None)
        layouts = (
            None
            if post_processor is None
            else packing_templates(post_processor, tokenizer.token_to_id)
        )
        if layouts is None:
            raise ValueError(
                f"{tokenizer!r} names no layout of special tokens for a "
                "classifier: ClassifierPreprocessor needs a tokenizer.json "
                "whose post-processor adds them (TemplateProcessing, "
                "BertProcessing or RobertaProcessing)."
            )
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length
        self.truncate = truncate
        self._layouts = layouts

    def get_config(self):
        """The arguments besides the tokenizer (saved on its own)."""
        return {
            "sequence_length": self.sequence_length,
            "truncate": self.truncate,
        }

    @classmethod
    def from_config(cls, config, tokenizer):
        return cls(tokenizer, **config)

    def __call__(self, x, y=None, sample_weight=None):
        columns = self._columns(x)
        encoded = [
            self.tokenizer.encode(column, add_special_tokens=False)
            for column in columns
        ]
        layout = self._layouts[len(columns) - 1]
        room = self.sequence_length - sum(
            1 for item, _ in layout if item not in (FIRST, SECOND)
        )
        if room < 0:
            raise ValueError(
                f"sequence_length={self.sequence_length} leaves no room: "
                f"the tokenizer adds {self.sequence_length - room} special "
                "tokens to a " + ("pair." if len(columns) == 2 else "text.")
            )
        batch = len(columns[0])
        token_ids = np.full(
            (batch, self.sequence_length), self.tokenizer.pad_token_id, "int32"
        )
        segment_ids = np.zeros((batch, self.sequence_length), "int32")
        padding_mask = np.zeros((batch, self.sequence_length), "int32")
        for row, texts in enumerate(zip(*encoded, strict=True)):
            kept = kept_lengths([len(t) for t in texts], room, self.truncate)
            ids, segments = [], []
            for item, segment in layout:
                if item in (FIRST, SECOND):
                    index = 0 if item == FIRST else 1
                    part = texts[index][: kept[index]]
                else:
                    part = [item]
                ids += part
                segments += [segment] * len(part)
            token_ids[row, : len(ids)] = ids
            segment_ids[row, : len(ids)] = segments
            padding_mask[row, : len(ids)] = 1
        packed = {
            "token_ids": token_ids,
            "segment_ids": segment_ids,
            "padding_mask": padding_mask,
        }
        if y is None and sample_weight is None:
            return packed
        if sample_weight is None:
            return packed, y
        return packed, y, sample_weight

    @staticmethod
    def _columns(x):
        """The text columns of `x`, each a list of str."""
        if not isinstance(x, tuple):
            x = (x,)
        if len(x) not in (1, 2):
            raise ValueError(
                "A classifier takes one text column or two (pairs). "
                f"Received: a tuple of {len(x)} columns."
            )
        columns = []
        for column in x:
            if isinstance(column, (str, bytes)):
                column = [column]
            column = [
                text.decode("utf-8") if isinstance(text, bytes) else text
                for text in np.asarray(column, dtype=object).reshape(-1)
            ]
            columns.append(column)
        if len(columns) == 2 and len(columns[0]) != len(columns[1]):
            raise ValueError(
                "The two text columns of a pair must have the same number "
                f"of texts. Received: {len(columns[0])} and "
                f"{len(columns[1])}."
            )
        return columns


__all__ = ["ClassifierPreprocessor"]
