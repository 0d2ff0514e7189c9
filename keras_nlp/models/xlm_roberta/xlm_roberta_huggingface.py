"""Hugging Face `xlm-roberta` checkpoints (XLM-R, multilingual-e5, ...).

RoBERTa's architecture and tensor names (see `roberta_huggingface`):
position table offset by the padding row, the type-0 token-type row folded
into the positions (fine-tuned models such as multilingual-e5 hold a
non-zero one), the pooler and the masked-LM head skipped.
"""

from keras_nlp.models.bert.bert_huggingface import ENCODER_IGNORED_FIELDS
from keras_nlp.models.bert.bert_huggingface import LAYER_NORM_OLD_NAMES
from keras_nlp.models.roberta.roberta_huggingface import read_roberta_style
from keras_nlp.models.roberta.roberta_huggingface import roberta_style_ignorable
from keras_nlp.models.roberta.roberta_huggingface import roberta_style_weights
from keras_nlp.models.roberta.roberta_huggingface import write_roberta_style
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import register_family

XLM_ROBERTA = register_family(
    HuggingFaceFamily(
        model_type="xlm-roberta",
        backbone="XLMRobertaBackbone",
        architectures=("XLMRobertaModel",),
        config_from_hf=read_roberta_style,
        config_to_hf=write_roberta_style,
        weights=roberta_style_weights("roberta."),
        ignored_fields=ENCODER_IGNORED_FIELDS,
        ignorable_tensors=roberta_style_ignorable(r"roberta\."),
        base_prefix="roberta.",
        old_names=LAYER_NORM_OLD_NAMES,
    )
)
