"""Hugging Face `opt` checkpoints against keras-hub's OPT.

keras-hub has no Hugging Face loader for OPT: the checkpoint is written
from a random keras-hub `OPTBackbone` with `transformers`' names and
layouts (the position table with fairseq's two leading rows), and that
model is the oracle (see `tests/saving/huggingface_written.py`).
"""

import json

import numpy as np
import pytest

from keras_nlp.models import Backbone
from keras_nlp.saving import PresetError
from keras_nlp.saving.huggingface import huggingface_config
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.huggingface_written import WrittenCheckpointTests

_POSITIONS = "model.decoder.embed_positions.weight"


def _config(oracle):
    return {
        "model_type": "opt",
        "architectures": ["OPTForCausalLM"],
        "vocab_size": oracle.vocabulary_size,
        "num_hidden_layers": oracle.num_layers,
        "num_attention_heads": oracle.num_heads,
        "hidden_size": oracle.hidden_dim,
        "word_embed_proj_dim": oracle.hidden_dim,
        "ffn_dim": oracle.intermediate_dim,
        "max_position_embeddings": oracle.max_sequence_length,
        "do_layer_norm_before": True,
        "_remove_final_layer_norm": False,
        "activation_function": "relu",
        "dropout": oracle.dropout,
        "attention_dropout": 0.0,
        "layerdrop": 0.0,
        "enable_bias": True,
        "init_std": 0.02,
        "prefix": "</s>",
        "torch_dtype": "float32",
    }


def _tensors(oracle):
    """`transformers`' OPT layout: (out, in) kernels, and two rows before
    position 0 (random here: nothing may read them)."""
    embeddings = oracle.embeddings
    positions = embeddings.position_embedding.position_embeddings.numpy()
    offset = np.random.default_rng(1).normal(size=(2, oracle.hidden_dim))
    tensors = {
        "model.decoder.embed_tokens.weight": (
            embeddings.token_embedding.embeddings
        ),
        _POSITIONS: np.concatenate([offset.astype(positions.dtype), positions]),
        "model.decoder.final_layer_norm.weight": oracle.layer_norm.gamma,
        "model.decoder.final_layer_norm.bias": oracle.layer_norm.beta,
    }
    hidden = oracle.hidden_dim
    for i, layer in enumerate(oracle.transformer_layers):
        prefix = f"model.decoder.layers.{i}."
        attention = layer._self_attention_layer
        for name, dense in (
            ("q_proj", attention._query_dense),
            ("k_proj", attention._key_dense),
            ("v_proj", attention._value_dense),
        ):
            tensors[prefix + f"self_attn.{name}.weight"] = (
                dense.kernel.numpy().reshape(hidden, -1).T
            )
            tensors[prefix + f"self_attn.{name}.bias"] = (
                dense.bias.numpy().reshape(-1)
            )
        output = attention._output_dense
        tensors.update(
            {
                prefix + "self_attn.out_proj.weight": (
                    output.kernel.numpy().reshape(-1, hidden).T
                ),
                prefix + "self_attn.out_proj.bias": output.bias,
                prefix + "self_attn_layer_norm.weight": (
                    layer._self_attention_layer_norm.gamma
                ),
                prefix + "self_attn_layer_norm.bias": (
                    layer._self_attention_layer_norm.beta
                ),
                prefix + "final_layer_norm.weight": (
                    layer._feedforward_layer_norm.gamma
                ),
                prefix + "final_layer_norm.bias": (
                    layer._feedforward_layer_norm.beta
                ),
                prefix + "fc1.weight": (
                    layer._feedforward_intermediate_dense.kernel.numpy().T
                ),
                prefix + "fc1.bias": layer._feedforward_intermediate_dense.bias,
                prefix + "fc2.weight": (
                    layer._feedforward_output_dense.kernel.numpy().T
                ),
                prefix + "fc2.bias": layer._feedforward_output_dense.bias,
            }
        )
    return tensors


_CASE = HFCase(
    "opt",
    "OPTBackbone",
    dict(
        vocabulary_size=96,
        num_layers=2,
        num_heads=4,
        hidden_dim=32,
        intermediate_dim=48,
        max_sequence_length=16,
    ),
    writer=tensor_writer(_config, _tensors),
)


class TestOPTCheckpoints(WrittenCheckpointTests):
    cases = [_CASE]
    meshes = ((2, 4),)
    # Our table has no rows before position 0: export writes them as zeros.
    export_rows = {_POSITIONS: slice(2, None)}


@pytest.fixture(scope="module")
def opt_config():
    import keras_hub

    return _config(keras_hub.models.OPTBackbone(**_CASE.config))


def _translate(tmp_path, fields):
    (tmp_path / "config.json").write_text(json.dumps(fields))
    return huggingface_config(Backbone, str(tmp_path))[2]


def test_config_translates(opt_config, tmp_path):
    assert _translate(tmp_path, opt_config) == dict(_CASE.config, dropout=0.1)


@pytest.mark.parametrize(
    "field, value",
    [
        ("do_layer_norm_before", False),
        ("word_embed_proj_dim", 16),
        ("enable_bias", False),
        ("activation_function", "gelu"),
    ],
)
def test_unsupported_values_are_named(opt_config, tmp_path, field, value):
    with pytest.raises(PresetError, match=f"{field}={value!r}"):
        _translate(tmp_path, dict(opt_config, **{field: value}))
