"""Hugging Face checkpoints: `config.json` and safetensors, read into shards.

`Backbone.from_preset(directory)` loads a Hugging Face checkpoint directory
(recognised by a `config.json` with a `model_type` and no `metadata.json`)
and `save_to_preset(directory, format="huggingface")` writes one. Each
`model_type` is a `HuggingFaceFamily`, declared in the model's folder
(`keras_nlp/models/llama/llama_huggingface.py`): its config translation
both ways and its tensor table of `Weight` rows (`tensor_table`), whose
conversions (`conversions`) serve import and export alike. Checkpoints
with block-scaled FP8 weights (`fp8`) load into any family, dequantized.
"""

from keras_nlp.saving.huggingface.checkpoint import Checkpoint
from keras_nlp.saving.huggingface.checkpoint import is_huggingface_directory
from keras_nlp.saving.huggingface.checkpoint import read_huggingface_config
from keras_nlp.saving.huggingface.conversions import HEADS_BIAS
from keras_nlp.saving.huggingface.conversions import HEADS_KERNEL
from keras_nlp.saving.huggingface.conversions import HEADS_OUTPUT_KERNEL
from keras_nlp.saving.huggingface.conversions import KERNEL
from keras_nlp.saving.huggingface.conversions import Add
from keras_nlp.saving.huggingface.conversions import Merge
from keras_nlp.saving.huggingface.conversions import Op
from keras_nlp.saving.huggingface.conversions import Pad
from keras_nlp.saving.huggingface.conversions import Permute
from keras_nlp.saving.huggingface.conversions import Split
from keras_nlp.saving.huggingface.conversions import Transpose
from keras_nlp.saving.huggingface.export import write_huggingface
from keras_nlp.saving.huggingface.family import COMMON_IGNORED_FIELDS
from keras_nlp.saving.huggingface.family import HuggingFaceConfig
from keras_nlp.saving.huggingface.family import HuggingFaceFamily
from keras_nlp.saving.huggingface.family import family_for_backbone
from keras_nlp.saving.huggingface.family import family_for_model_type
from keras_nlp.saving.huggingface.family import register_family
from keras_nlp.saving.huggingface.family import registered_families
from keras_nlp.saving.huggingface.fp8 import Fp8
from keras_nlp.saving.huggingface.fp8 import dequantize_fp8
from keras_nlp.saving.huggingface.fp8 import read_quantization
from keras_nlp.saving.huggingface.loading import build_from_huggingface
from keras_nlp.saving.huggingface.loading import huggingface_config
from keras_nlp.saving.huggingface.mxfp4 import MXFP4
from keras_nlp.saving.huggingface.mxfp4 import Mxfp4
from keras_nlp.saving.huggingface.mxfp4 import dequantize_mxfp4
from keras_nlp.saving.huggingface.task_heads import MASKED_LM
from keras_nlp.saving.huggingface.task_heads import TEXT_CLASSIFIER
from keras_nlp.saving.huggingface.task_heads import TaskHead
from keras_nlp.saving.huggingface.task_heads import activation_check
from keras_nlp.saving.huggingface.task_heads import classifier_rows
from keras_nlp.saving.huggingface.task_heads import masked_lm_rows
from keras_nlp.saving.huggingface.task_heads import register_task_head
from keras_nlp.saving.huggingface.tensor_table import StoredTensor
from keras_nlp.saving.huggingface.tensor_table import Weight
from keras_nlp.saving.huggingface.tensor_table import attention_rows
from keras_nlp.saving.huggingface.tensor_table import bind
from keras_nlp.saving.huggingface.tensor_table import layer_norm_rows
from keras_nlp.saving.huggingface.tensor_table import linear_rows

__all__ = [
    "COMMON_IGNORED_FIELDS",
    "HEADS_BIAS",
    "HEADS_KERNEL",
    "HEADS_OUTPUT_KERNEL",
    "KERNEL",
    "MASKED_LM",
    "MXFP4",
    "Add",
    "Checkpoint",
    "Fp8",
    "HuggingFaceConfig",
    "HuggingFaceFamily",
    "Merge",
    "Mxfp4",
    "Op",
    "Pad",
    "Permute",
    "Split",
    "StoredTensor",
    "TEXT_CLASSIFIER",
    "TaskHead",
    "Transpose",
    "Weight",
    "activation_check",
    "attention_rows",
    "classifier_rows",
    "bind",
    "dequantize_fp8",
    "dequantize_mxfp4",
    "layer_norm_rows",
    "linear_rows",
    "masked_lm_rows",
    "build_from_huggingface",
    "family_for_backbone",
    "family_for_model_type",
    "huggingface_config",
    "is_huggingface_directory",
    "read_huggingface_config",
    "read_quantization",
    "register_family",
    "register_task_head",
    "registered_families",
    "write_huggingface",
]
