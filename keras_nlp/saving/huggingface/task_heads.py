"""Task heads of Hugging Face checkpoints: which architecture holds which of
our task heads, and how the head's tensors are named.

A family module registers a `TaskHead` per task it maps
(`register_task_head`): `BertForSequenceClassification`'s `classifier.*`
is `BertTextClassifier`'s `logits/*`, `RobertaForMaskedLM`'s `lm_head.*`
is `RobertaMaskedLM`'s `mlm_head/*`. The rows are `Weight`s (our task
model's variable paths, their tensor names), so import reads the head into
its shards as the backbone's weights are read, and export writes it
beside the backbone's tensors.

What a checkpoint's `architectures` means for a task built on it:

- the head's architecture: the head is loaded (every tensor of it must be
  present and fit);
- a pretraining architecture (`*Model`, `*ForMaskedLM`,
  `*ForPreTraining`) other than the head's: the pretrained encoder loads
  and the task's head starts fresh, as it always has;
- any other head (`*ForTokenClassification`, `*ForQuestionAnswering`,
  ...): refused, naming it, since its fine-tuned head is not ours and
  dropping it silently would hide that.
"""

import dataclasses
import re

from keras_nlp.saving.huggingface.tensor_table import Weight
from keras_nlp.saving.huggingface.tensor_table import layer_norm_rows
from keras_nlp.saving.huggingface.tensor_table import linear_rows
from keras_nlp.saving.preset_files import PresetError

TEXT_CLASSIFIER = "text_classifier"
MASKED_LM = "masked_lm"
# Architectures holding a pretrained encoder and no fine-tuned head: a task
# built on one starts with a fresh head.
PRETRAINING_SUFFIXES = ("Model", "ForMaskedLM", "ForPreTraining")
# `num_labels` of Hugging Face's configs when neither it nor `id2label` is
# written.
DEFAULT_NUM_LABELS = 2


@dataclasses.dataclass(frozen=True)
class TaskHead:
    """One task's head in one family's Hugging Face checkpoints.

    Args:
        model_type: the family's `model_type`.
        task: `TEXT_CLASSIFIER` or `MASKED_LM`.
        architecture: the Hugging Face class (`BertForSequenceClassification`),
            written as `architectures` on export.
        weights: `Weight` rows from our task model's head variables
            (`logits/kernel`, `mlm_head/output_bias`) to their tensors.
        also_loads: other architectures holding the same head tensors
            (`BertForPreTraining` holds `BertForMaskedLM`'s).
        ignorable_tensors: regexes (full match) of the head's tensors that
            are not weights of ours (a decoder tied to the token
            embedding, saved by older versions).
        check: optional `(config.json data, path) -> None`, raising
            `PresetError` for a config whose head computes what ours
            cannot (another activation).
        task_arguments: dict of the task constructor's arguments that
            make our head compute Hugging Face's (the head LayerNorm's
            epsilon).
    """

    model_type: str
    task: str
    architecture: str
    weights: tuple
    also_loads: tuple = ()
    ignorable_tensors: tuple = ()
    check: object = None
    task_arguments: dict = dataclasses.field(default_factory=dict, hash=False)

    @property
    def architectures(self):
        return (self.architecture, *self.also_loads)

    def tensor_patterns(self):
        """Regexes of every tensor of this head (for backbone loads, which
        drop it)."""
        return tuple(re.escape(w.theirs) for w in self.weights) + tuple(
            self.ignorable_tensors
        )


_HEADS = {}


def register_task_head(head):
    """Registers `head` for its family and task; returns it."""
    key = (head.model_type, head.task)
    if key in _HEADS and _HEADS[key] != head:
        raise ValueError(
            f"Two {head.task} heads are registered for model_type "
            f"{head.model_type!r}."
        )
    _HEADS[key] = head
    return head


def task_head(model_type, task):
    """The `TaskHead` of `task` for `model_type`, or None."""
    return _HEADS.get((model_type, task))


def task_head_patterns(model_type):
    """Regexes of every registered head tensor of `model_type`."""
    return tuple(
        pattern
        for (kind, _), head in sorted(_HEADS.items())
        if kind == model_type
        for pattern in head.tensor_patterns()
    )


def _is_pretraining(architecture):
    return architecture.endswith(PRETRAINING_SUFFIXES)


def head_to_load(data, path, task, owner):
    """The `TaskHead` a checkpoint's head loads through, or None for a
    fresh head.

    Args:
        data: the checkpoint's `config.json`.
        path: its path, for messages.
        task: `TEXT_CLASSIFIER` or `MASKED_LM`.
        owner: the task class name, for messages.

    Raises:
        PresetError: the checkpoint holds a fine-tuned head of another
            kind, or a head whose config ours cannot compute.
    """
    model_type = data.get("model_type")
    if not task_head_patterns(model_type):
        # No task heads for this family (a decoder, say): the backbone's
        # loader says what it loads as.
        return None
    head = task_head(model_type, task)
    architectures = data.get("architectures") or []
    if not isinstance(architectures, list) or not all(
        isinstance(a, str) for a in architectures
    ):
        raise PresetError(
            f"{path}: architectures must be a list of class names. "
            f"Received: {architectures!r}."
        )
    if head is not None and any(a in head.architectures for a in architectures):
        if head.check is not None:
            head.check(data, path)
        return head
    others = [a for a in architectures if not _is_pretraining(a)]
    if others:
        loads = (
            f"{owner} loads the head of {' or '.join(head.architectures)} "
            "checkpoints"
            if head is not None
            else f"keras_nlp maps no {model_type!r} {task} head"
        )
        raise PresetError(
            f"{path}: architectures {others} hold a fine-tuned head that is "
            f"not a {owner}'s; {loads}. To fine-tune its encoder anyway, "
            "load the backbone (`Backbone.from_preset`) and build the task "
            "on it."
        )
    return None


def num_labels(data, path):
    """The number of classes of a classification checkpoint's config:
    `num_labels`, else the size of `id2label`, else Hugging Face's default
    (2)."""
    id2label = data.get("id2label")
    count = data.get("num_labels")
    if count is None and isinstance(id2label, dict):
        count = len(id2label)
    if count is None:
        return DEFAULT_NUM_LABELS
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise PresetError(
            f"{path}: num_labels must be a positive integer. Received: "
            f"{count!r}."
        )
    if isinstance(id2label, dict) and len(id2label) != count:
        raise PresetError(
            f"{path}: num_labels={count} but id2label has {len(id2label)} "
            "labels."
        )
    return count


def label_fields(num_classes, id2label=None):
    """`id2label` and `label2id` of a classification `config.json`:
    `id2label` as imported when it has `num_classes` labels, else
    `LABEL_<i>` as Hugging Face names them."""
    if not isinstance(id2label, dict) or len(id2label) != num_classes:
        id2label = {str(i): f"LABEL_{i}" for i in range(num_classes)}
    id2label = {str(k): v for k, v in id2label.items()}
    return {
        "id2label": id2label,
        "label2id": {v: int(k) for k, v in id2label.items()},
    }


def classifier_rows(logits, pooled=None):
    """A text classifier's head rows: our `logits` layer is their linear
    layer `logits` (`classifier`), and our `pooled_dense`, for heads with
    a pooler of their own, is their `pooled` (`classifier.dense`)."""
    rows = linear_rows("logits", logits)
    if pooled is not None:
        rows += linear_rows("pooled_dense", pooled)
    return tuple(rows)


def masked_lm_rows(dense, layer_norm, bias):
    """A masked LM's head rows: their transform's linear layer `dense`,
    its LayerNorm `layer_norm` and the per-token `bias` (the decoder is the
    token embedding, tied)."""
    head = "mlm_head/"
    return (
        *linear_rows(head + "intermediate_dense", dense),
        *layer_norm_rows(head + "intermediate_layer_norm", layer_norm),
        Weight(head + "output_bias", bias),
    )


def activation_check(field, default, computed, owner):
    """A `TaskHead.check`: the head's activation field (`hidden_act`,
    absent: `default`) must be one of `computed`, the names of the
    activation `owner`'s head computes."""

    def check(data, path):
        value = data.get(field)
        value = default if value is None else value
        if value not in computed:
            raise PresetError(
                f"{path}: {field}={value!r}, but {owner}'s head computes "
                f"{computed[0]!r}, so its logits would differ from the "
                f"checkpoint's. Supported: "
                f"{', '.join(repr(c) for c in computed)}."
            )

    return check
