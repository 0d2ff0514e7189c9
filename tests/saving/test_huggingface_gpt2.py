"""Hugging Face `gpt2` checkpoints against keras-hub's loader and exporter.

See `tests/saving/huggingface_checkpoints.py`: keras-hub exports a tiny
random GPT-2 (fused `c_attn`, `(in, out)` Conv1D weights) and loads it back
as the oracle.
"""

import json

import pytest

from keras_nlp.models import Backbone
from keras_nlp.saving import PresetError
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import write_checkpoint

# keras-hub's loader takes the MLP width to be 4 * n_embd.
_CASE = HFCase(
    "gpt2",
    "GPT2Backbone",
    dict(
        vocabulary_size=96,
        num_layers=2,
        num_heads=4,
        hidden_dim=32,
        intermediate_dim=128,
        max_sequence_length=16,
    ),
)


class TestGPT2Checkpoints(HuggingFaceFamilyTests):
    cases = [_CASE]


@pytest.fixture(scope="module")
def gpt2_checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpt2_config")
    write_checkpoint(_CASE, path)
    return path


def test_config_round_trips_through_hugging_face_fields(gpt2_checkpoint):
    from keras_nlp.saving.huggingface import huggingface_config

    family, cls, config = huggingface_config(Backbone, str(gpt2_checkpoint))
    assert cls.__name__ == "GPT2Backbone"
    assert config == dict(_CASE.config, dropout=0.1)
    written = family.export_config(cls(**config).get_config())
    assert written["n_inner"] == 128 and written["n_positions"] == 16
    assert written["activation_function"] == "gelu_new"


@pytest.mark.parametrize(
    "field, value",
    [
        ("activation_function", "relu"),
        ("layer_norm_epsilon", 1e-6),
        ("scale_attn_by_inverse_layer_idx", True),
        ("tie_word_embeddings", False),
    ],
)
def test_unsupported_values_are_named(gpt2_checkpoint, field, value):
    from keras_nlp.saving.huggingface import huggingface_config

    config = json.loads((gpt2_checkpoint / "config.json").read_text())
    config[field] = value
    path = gpt2_checkpoint.parent / f"bad_{field}"
    path.mkdir(exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(PresetError, match=f"{field}={value!r}"):
        huggingface_config(Backbone, str(path))
