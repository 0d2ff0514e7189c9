"""Hugging Face `xlm-roberta` checkpoints against keras-hub's loader.

Written as an `XLMRobertaModel` checkpoint (no prefix, with its pooler,
which the backbone keeps unused, `keep_pooler=True`, and exports; keras-hub
skips it) with a non-zero token-type row, as fine-tuned models have:
keras-hub's `convert_xlm_roberta` folds it into the position table, and so
does ours.
"""

import numpy as np

from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.test_huggingface_roberta import ROBERTA_CONFIG
from tests.saving.test_huggingface_roberta import roberta_config
from tests.saving.test_huggingface_roberta import roberta_tensors


def _token_type(hidden):
    rng = np.random.default_rng(3)
    return rng.normal(0.0, 0.2, (1, hidden)).astype("float16").astype("float32")


def _pooler(oracle):
    rng = np.random.default_rng(4)
    hidden = oracle.hidden_dim
    pooler = rng.normal(size=(hidden, hidden)).astype("float32")
    return {
        "pooler.dense.weight": pooler,
        "pooler.dense.bias": np.zeros(hidden, "float32"),
    }


class TestXLMRobertaCheckpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "xlm_roberta_token_type_folded",
            "XLMRobertaBackbone",
            ROBERTA_CONFIG,
            writer=tensor_writer(
                roberta_config("xlm-roberta", "XLMRobertaModel"),
                roberta_tensors("", _token_type, _pooler),
            ),
            ours_only=("pooled_dense/kernel", "pooled_dense/bias"),
        )
    ]
    meshes = ((2, 4),)
