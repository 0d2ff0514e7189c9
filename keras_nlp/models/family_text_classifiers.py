"""The text classifier of each encoder family.

Such a class names its backbone and says what its head is (where it reads
the backbone, its own pooler if any, its dropout names and default rate);
everything else (`fit`, presets, LoRA, sharding) is `TextClassifier`'s.
`_family_text_classifier` gives each class keras-hub's constructor
signature (with `hidden_dim` where the head has a pooler of its own),
writes its docstring from one template and registers it for Keras
serialization (`keras_nlp.models>BertTextClassifier`). keras-hub's older
names (`BertClassifier`, ...) are subclasses that change nothing.

ELECTRA and XLNet have no classifier in keras-hub 0.32: their heads follow
Hugging Face's `ElectraForSequenceClassification` (first token, dropout,
dense + GELU, dropout, logits) and `XLNetForSequenceClassification`
(last token, dense + tanh, dropout, logits).
"""

import textwrap

import keras

from keras_nlp.models.albert.albert_backbone import AlbertBackbone
from keras_nlp.models.bert.bert_backbone import BertBackbone
from keras_nlp.models.deberta_v3.deberta_v3_backbone import DebertaV3Backbone
from keras_nlp.models.distil_bert.distil_bert_backbone import DistilBertBackbone
from keras_nlp.models.electra.electra_backbone import ElectraBackbone
from keras_nlp.models.f_net.f_net_backbone import FNetBackbone
from keras_nlp.models.roberta.roberta_backbone import RobertaBackbone
from keras_nlp.models.text_classifier import FIRST_TOKEN
from keras_nlp.models.text_classifier import LAST_TOKEN
from keras_nlp.models.text_classifier import TextClassifier
from keras_nlp.models.xlm_roberta.xlm_roberta_backbone import XLMRobertaBackbone
from keras_nlp.models.xlnet.xlnet_backbone import XLNetBackbone

_DOCSTRING = """\
A `{backbone}` and a classification head: class logits.

{head}

Args:
    backbone: a `{backbone}`.
    num_classes: int, the number of classes.
    preprocessor: optional, what packs text (a batch of str, or a tuple of
        two: pairs) into the inputs in `fit`, `evaluate` and `predict`:
        a `keras_nlp.tokenizers.ClassifierPreprocessor` or keras-hub's.
    activation: optional activation of the logits (`"softmax"` for
        probabilities).
{hidden_dim}    dropout: float, the head's dropout rate.
    **kwargs: forwarded to `keras.Model`.

Example:

```python
import numpy as np
import keras_nlp

backbone = keras_nlp.models.{backbone}(
{config}
)
classifier = keras_nlp.models.{name}(backbone, num_classes=3)
inputs = {inputs}
classifier.predict(inputs, verbose=0).shape  # (2, 3)
```
"""

_HIDDEN_DIM = """\
    hidden_dim: int, the width of the head's pooler; defaults to the
        backbone's `hidden_dim`.
"""

_WIDTH = 72
_SMALL = dict(
    vocabulary_size=64,
    num_layers=1,
    num_heads=2,
    hidden_dim=16,
    intermediate_dim=32,
    max_sequence_length=16,
)


def _constructor(with_hidden_dim, default_dropout):
    """keras-hub's constructor of a family's classifier."""
    if with_hidden_dim:

        def __init__(
            self,
            backbone,
            num_classes,
            preprocessor=None,
            activation=None,
            hidden_dim=None,
            dropout=default_dropout,
            **kwargs,
        ):
            TextClassifier.__init__(
                self,
                backbone,
                num_classes,
                preprocessor,
                activation,
                hidden_dim=hidden_dim,
                dropout=dropout,
                **kwargs,
            )

    else:

        def __init__(
            self,
            backbone,
            num_classes,
            preprocessor=None,
            activation=None,
            dropout=default_dropout,
            **kwargs,
        ):
            TextClassifier.__init__(
                self,
                backbone,
                num_classes,
                preprocessor,
                activation,
                dropout=dropout,
                **kwargs,
            )

    return __init__


def _family_text_classifier(head, dropout, example, inputs):
    """Gives a family's `TextClassifier` subclass its constructor and
    docstring, and registers it.

    Args:
        head: what the head is, completing "The head reads ...".
        dropout: the default dropout rate (keras-hub's).
        example: keyword arguments of a tiny backbone, for the example.
        inputs: the names of the backbone's inputs, for the example.
    """

    def declare(cls):
        cls._declared_with = (head, dropout, example, inputs)
        with_hidden_dim = cls.pooled_activation is not None
        cls.__init__ = _constructor(with_hidden_dim, dropout)
        backbone = cls.backbone_cls.__name__
        config = ", ".join(f"{key}={value!r}" for key, value in example.items())
        arrays = {
            "token_ids": "np.array([[2, 5, 6, 3], [2, 7, 3, 0]], 'int32')",
            "segment_ids": "np.zeros((2, 4), 'int32')",
            "padding_mask": "np.array([[1, 1, 1, 1], [1, 1, 1, 0]], 'int32')",
        }
        inputs_text = (
            "{\n"
            + "".join(f"    {name!r}: {arrays[name]},\n" for name in inputs)
            + "}"
        )
        cls.__doc__ = _DOCSTRING.format(
            name=cls.__name__,
            backbone=backbone,
            head=textwrap.fill(
                f"The head reads {head}. Everything else (`fit`, presets, "
                "LoRA, sharding) is `keras_nlp.models.TextClassifier`'s.",
                _WIDTH,
                break_on_hyphens=False,
            ),
            hidden_dim=_HIDDEN_DIM if with_hidden_dim else "",
            config=textwrap.fill(
                config + ",",
                _WIDTH,
                initial_indent="    ",
                subsequent_indent="    ",
            ),
            inputs=inputs_text,
        )
        return keras.saving.register_keras_serializable(
            package="keras_nlp.models"
        )(cls)

    return declare


_WITH_SEGMENTS = ("token_ids", "segment_ids", "padding_mask")
_WITHOUT_SEGMENTS = ("token_ids", "padding_mask")
_POOLED = "the backbone's pooled output (its tanh pooler on [CLS]), then "


@_family_text_classifier(
    _POOLED + "dropout (`output_dropout`) and the logits",
    0.1,
    dict(_SMALL, embedding_dim=8),
    _WITH_SEGMENTS,
)
class AlbertTextClassifier(TextClassifier):
    backbone_cls = AlbertBackbone
    learning_rate = 1e-5


@_family_text_classifier(
    _POOLED + "dropout (`classifier_dropout`) and the logits",
    0.1,
    _SMALL,
    _WITH_SEGMENTS,
)
class BertTextClassifier(TextClassifier):
    backbone_cls = BertBackbone
    output_dropout_name = "classifier_dropout"


@_family_text_classifier(
    "the first token: dropout, a dense layer with exact GELU "
    "(`pooled_dense`), dropout at the backbone's rate and the logits",
    0.0,
    dict(_SMALL, bucket_size=4),
    _WITHOUT_SEGMENTS,
)
class DebertaV3TextClassifier(TextClassifier):
    backbone_cls = DebertaV3Backbone
    head_input = FIRST_TOKEN
    pooled_activation = "gelu"  # exact (erf), Keras's default
    pooled_dropout_name = "pooled_dropout"
    output_dropout_name = "classifier_dropout"
    output_dropout_from_backbone = True


@_family_text_classifier(
    "the first token ([CLS]): a dense layer with ReLU (`pooled_dense`), "
    "dropout and the logits",
    0.2,
    _SMALL,
    _WITHOUT_SEGMENTS,
)
class DistilBertTextClassifier(TextClassifier):
    backbone_cls = DistilBertBackbone
    head_input = FIRST_TOKEN
    pooled_activation = "relu"


# Hugging Face's ElectraClassificationHead (keras-hub has none).
@_family_text_classifier(
    "the first token ([CLS]): dropout, a dense layer with exact GELU "
    "(`pooled_dense`), dropout and the logits, as Hugging Face's "
    "`ElectraForSequenceClassification` (keras-hub has no ELECTRA "
    "classifier); the backbone's pooler is not used",
    0.1,
    dict(
        {k: v for k, v in _SMALL.items() if k != "vocabulary_size"},
        vocab_size=64,
        embedding_dim=8,
    ),
    _WITH_SEGMENTS,
)
class ElectraTextClassifier(TextClassifier):
    backbone_cls = ElectraBackbone
    head_input = FIRST_TOKEN
    pooled_activation = "gelu"  # exact (erf), Keras's default
    pooled_dropout_name = "pooled_dropout"


@_family_text_classifier(
    _POOLED + "dropout (`output_dropout`) and the logits",
    0.1,
    {k: v for k, v in _SMALL.items() if k != "num_heads"},
    ("token_ids", "segment_ids"),
)
class FNetTextClassifier(TextClassifier):
    backbone_cls = FNetBackbone


_ROBERTA_HEAD = (
    "the first token (<s>): dropout, a dense layer with tanh "
    "(`pooled_dense`), dropout and the logits"
)


@_family_text_classifier(_ROBERTA_HEAD, 0.0, _SMALL, _WITHOUT_SEGMENTS)
class RobertaTextClassifier(TextClassifier):
    backbone_cls = RobertaBackbone
    head_input = FIRST_TOKEN
    pooled_activation = "tanh"
    pooled_dropout_name = "pooled_dropout"


@_family_text_classifier(_ROBERTA_HEAD, 0.0, _SMALL, _WITHOUT_SEGMENTS)
class XLMRobertaTextClassifier(TextClassifier):
    backbone_cls = XLMRobertaBackbone
    head_input = FIRST_TOKEN
    pooled_activation = "tanh"
    pooled_dropout_name = "pooled_dropout"


# Hugging Face's XLNetForSequenceClassification (keras-hub has none).
@_family_text_classifier(
    "the last token (XLNet's <cls>: pad on the left): a dense layer with "
    "tanh (`pooled_dense`), dropout and the logits, as Hugging Face's "
    "`XLNetForSequenceClassification` (its sequence summary; keras-hub has "
    "no XLNet classifier)",
    0.1,
    {k: v for k, v in _SMALL.items() if k != "max_sequence_length"},
    ("token_ids", "padding_mask", "segment_ids"),
)
class XLNetTextClassifier(TextClassifier):
    backbone_cls = XLNetBackbone
    head_input = LAST_TOKEN
    pooled_activation = "tanh"


def _keras_hub_alias(cls, name):
    """A subclass named as keras-hub's older name of `cls` (`BertClassifier`
    for `BertTextClassifier`): the same model, its own registered name."""
    alias = type(name, (cls,), {"__module__": __name__, "__qualname__": name})
    return _family_text_classifier(*cls._declared_with)(alias)


AlbertClassifier = _keras_hub_alias(AlbertTextClassifier, "AlbertClassifier")
BertClassifier = _keras_hub_alias(BertTextClassifier, "BertClassifier")
DebertaV3Classifier = _keras_hub_alias(
    DebertaV3TextClassifier, "DebertaV3Classifier"
)
DistilBertClassifier = _keras_hub_alias(
    DistilBertTextClassifier, "DistilBertClassifier"
)
FNetClassifier = _keras_hub_alias(FNetTextClassifier, "FNetClassifier")
RobertaClassifier = _keras_hub_alias(RobertaTextClassifier, "RobertaClassifier")
XLMRobertaClassifier = _keras_hub_alias(
    XLMRobertaTextClassifier, "XLMRobertaClassifier"
)
