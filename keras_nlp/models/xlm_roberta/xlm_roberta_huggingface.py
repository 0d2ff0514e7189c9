"""Hugging Face `xlm-roberta` checkpoints (XLM-R, multilingual-e5, ...).

RoBERTa's architecture and tensor names (see `roberta_huggingface`):
position table offset by the padding row, the type-0 token-type row folded
into the positions (fine-tuned models such as multilingual-e5 hold a
non-zero one), the pooler and the masked-LM head skipped.
"""

from keras_nlp.models.roberta.roberta_huggingface import register_roberta_style

XLM_ROBERTA = register_roberta_style(
    "xlm-roberta", "XLMRobertaBackbone", "XLMRobertaModel"
)
