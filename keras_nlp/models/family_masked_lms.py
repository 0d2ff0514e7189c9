"""The masked LM of each encoder family keras-hub 0.32 has one for.

Each class names its backbone and its head's dense activation; the rest
is `MaskedLM`'s. `_family_masked_lm` writes the docstring from one template
and registers the class for Keras serialization
(`keras_nlp.models>BertMaskedLM`).
"""

import keras

from keras_nlp.models.albert.albert_backbone import AlbertBackbone
from keras_nlp.models.bert.bert_backbone import BertBackbone
from keras_nlp.models.deberta_v3.deberta_v3_backbone import DebertaV3Backbone
from keras_nlp.models.distil_bert.distil_bert_backbone import DistilBertBackbone
from keras_nlp.models.f_net.f_net_backbone import FNetBackbone
from keras_nlp.models.masked_lm import MaskedLM
from keras_nlp.models.roberta.roberta_backbone import RobertaBackbone
from keras_nlp.models.xlm_roberta.xlm_roberta_backbone import XLMRobertaBackbone

_DOCSTRING = """\
A `{backbone}` and its tied masked-LM head: token logits.

The head's dense layer uses {activation}. Everything else is
`keras_nlp.models.MaskedLM`'s.

Args:
    backbone: a `{backbone}`.
    preprocessor: optional, where keras-hub takes it (kept, not called).
    **kwargs: forwarded to `keras.Model`.

Example:

```python
import numpy as np
import keras_nlp

backbone = keras_nlp.models.{backbone}(
    vocabulary_size=64, num_layers=1, hidden_dim=16, intermediate_dim=32,
    max_sequence_length=16,{extra}
)
masked_lm = keras_nlp.models.{name}(backbone)
inputs = {{
    "token_ids": np.array([[2, 5, 1, 3]], "int32"),{inputs}
    "mask_positions": np.array([[2]], "int32"),
}}
masked_lm.predict(inputs, verbose=0).shape  # (1, 1, 64)
```
"""

_SEGMENTS = '\n    "segment_ids": np.zeros((1, 4), "int32"),'
_MASK = '\n    "padding_mask": np.ones((1, 4), "int32"),'


def _family_masked_lm(extra="", inputs=_MASK):
    def declare(cls):
        activation = cls.intermediate_activation
        cls.__doc__ = _DOCSTRING.format(
            name=cls.__name__,
            backbone=cls.backbone_cls.__name__,
            activation=f"`{activation}`"
            + (" (exact, erf)" if activation == "gelu" else ""),
            extra=extra,
            inputs=inputs,
        )
        return keras.saving.register_keras_serializable(
            package="keras_nlp.models"
        )(cls)

    return declare


_HEADS = " num_heads=2,"


@_family_masked_lm(_HEADS + " embedding_dim=8,", _SEGMENTS + _MASK)
class AlbertMaskedLM(MaskedLM):
    backbone_cls = AlbertBackbone
    intermediate_activation = "gelu_approximate"


@_family_masked_lm(_HEADS, _SEGMENTS + _MASK)
class BertMaskedLM(MaskedLM):
    backbone_cls = BertBackbone


@_family_masked_lm(_HEADS + " bucket_size=4,")
class DebertaV3MaskedLM(MaskedLM):
    backbone_cls = DebertaV3Backbone


@_family_masked_lm(_HEADS)
class DistilBertMaskedLM(MaskedLM):
    backbone_cls = DistilBertBackbone


@_family_masked_lm("", _SEGMENTS)
class FNetMaskedLM(MaskedLM):
    backbone_cls = FNetBackbone


@_family_masked_lm(_HEADS)
class RobertaMaskedLM(MaskedLM):
    backbone_cls = RobertaBackbone


@_family_masked_lm(_HEADS)
class XLMRobertaMaskedLM(MaskedLM):
    backbone_cls = XLMRobertaBackbone
