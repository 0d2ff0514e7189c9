"""Hugging Face `gpt_neox` checkpoints against keras-hub's GPT-NeoX.

keras-hub has no Hugging Face loader for GPT-NeoX: the checkpoint is
written from a random keras-hub `GPTNeoXBackbone` with `transformers`'
names and layouts (the fused `query_key_value` rows grouped per head as
`[query | key | value]`), and that model is the oracle (see
`tests/saving/huggingface_written.py`). Pythia's real fields (exact GELU,
a separate `embed_out`), which keras-hub's backbone cannot express, load
into our backbone's options (`tests/saving/huggingface_options.py`).
"""

import dataclasses
import json

import numpy as np
import pytest

from keras_nlp.models import Backbone
from keras_nlp.saving import PresetError
from keras_nlp.saving.huggingface import huggingface_config
from tests.models.backbone_checks import random_inputs
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.huggingface_options import OptionCheckpointTests
from tests.saving.huggingface_options import assert_feedforward_is_erf_gelu
from tests.saving.huggingface_options import written_checkpoint
from tests.saving.huggingface_written import WrittenCheckpointTests


def _config(oracle):
    return {
        "model_type": "gpt_neox",
        "architectures": ["GPTNeoXForCausalLM"],
        "vocab_size": oracle.vocabulary_size,
        "num_hidden_layers": oracle.num_layers,
        "num_attention_heads": oracle.num_heads,
        "hidden_size": oracle.hidden_dim,
        "intermediate_size": oracle.intermediate_dim,
        "rotary_pct": oracle.rotary_percentage,
        "rotary_emb_base": oracle.rotary_max_wavelength,
        "layer_norm_eps": oracle.layer_norm_epsilon,
        "max_position_embeddings": oracle.max_sequence_length,
        "hidden_act": "gelu_fast",
        "use_parallel_residual": True,
        "tie_word_embeddings": True,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
        "torch_dtype": "float32",
    }


def _dense(tensors, name, dense):
    tensors[name + ".weight"] = dense.kernel.numpy().T
    tensors[name + ".bias"] = dense.bias


def _norm(tensors, name, norm):
    tensors[name + ".weight"] = norm.gamma
    tensors[name + ".bias"] = norm.beta


def _tensors(oracle):
    """`transformers`' GPT-NeoX layout: (out, in) kernels; the fused
    projection's rows are heads of [query | key | value] rows."""
    tensors = {"gpt_neox.embed_in.weight": oracle.token_embedding.embeddings}
    _norm(tensors, "gpt_neox.final_layer_norm", oracle.layer_norm)
    hidden, heads = oracle.hidden_dim, oracle.num_heads
    head_dim = hidden // heads
    for i, layer in enumerate(oracle.transformer_layers):
        prefix = f"gpt_neox.layers.{i}."
        attention = layer._self_attention_layer
        fused = attention._qkv_dense
        # keras-hub: (hidden, heads, 3 * head_dim), q | k | v per head.
        kernel = fused.kernel.numpy().reshape(hidden, heads, 3, head_dim)
        q, k, v = (kernel[:, :, j] for j in range(3))
        rows = np.stack([q, k, v], axis=2).reshape(hidden, 3 * hidden).T
        tensors[prefix + "attention.query_key_value.weight"] = rows
        tensors[prefix + "attention.query_key_value.bias"] = (
            fused.bias.numpy().reshape(-1)
        )
        _dense(tensors, prefix + "attention.dense", attention._output_dense)
        _norm(
            tensors,
            prefix + "input_layernorm",
            layer._self_attention_layer_norm,
        )
        _norm(
            tensors,
            prefix + "post_attention_layernorm",
            layer._feedforward_layer_norm,
        )
        _dense(
            tensors,
            prefix + "mlp.dense_h_to_4h",
            layer._feedforward_intermediate_dense,
        )
        _dense(
            tensors,
            prefix + "mlp.dense_4h_to_h",
            layer._feedforward_output_dense,
        )
    return tensors


_CASE = HFCase(
    "gpt_neox",
    "GPTNeoXBackbone",
    dict(
        vocabulary_size=96,
        num_layers=2,
        num_heads=4,
        hidden_dim=32,
        intermediate_dim=48,
        rotary_percentage=0.5,
        rotary_max_wavelength=500,
        max_sequence_length=32,
    ),
    writer=tensor_writer(_config, _tensors),
)


class TestGPTNeoXCheckpoints(WrittenCheckpointTests):
    cases = [_CASE]
    meshes = ((2, 4),)
    # Export names the tanh GELU "gelu_new"; "gelu_fast" is the same.
    export_fields_differ = ("hidden_act",)


@pytest.fixture(scope="module")
def neox_config():
    import keras_hub

    return _config(keras_hub.models.GPTNeoXBackbone(**_CASE.config))


def _translate(tmp_path, fields):
    (tmp_path / "config.json").write_text(json.dumps(fields))
    return huggingface_config(Backbone, str(tmp_path))[2]


def test_newer_field_names_translate_alike(neox_config, tmp_path):
    expected = _translate(tmp_path, neox_config)
    assert expected["rotary_percentage"] == 0.5
    assert expected["rotary_max_wavelength"] == 500
    fields = dict(neox_config)
    fields["partial_rotary_factor"] = fields.pop("rotary_pct")
    fields["rope_theta"] = fields.pop("rotary_emb_base")
    assert _translate(tmp_path, fields) == expected


# Pythia's shape: a quarter of each head rotated, base 10000.
_PYTHIA = dataclasses.replace(
    _CASE,
    name="pythia",
    config=dict(
        _CASE.config, rotary_percentage=0.25, rotary_max_wavelength=10000
    ),
)


def _embed_out(oracle):
    rng = np.random.default_rng(7)
    shape = (oracle.vocabulary_size, oracle.hidden_dim)
    return {
        "embed_out.weight": rng.normal(0, 0.2, shape)
        .astype("float16")
        .astype("float32")
    }


class TestPythiaCheckpoints(OptionCheckpointTests):
    """Pythia's exact GELU and untied `embed_out`."""

    @pytest.fixture(scope="class")
    @classmethod
    def written(cls, tmp_path_factory):
        return written_checkpoint(
            tmp_path_factory,
            _PYTHIA,
            options=dict(hidden_activation="gelu", tie_word_embeddings=False),
            fields=dict(hidden_act="gelu", tie_word_embeddings=False),
            inputs=random_inputs(96, length=10),
            extra_tensors=_embed_out,
            extra_weights=lambda tensors: {
                "token_embedding/reverse_embeddings": tensors[
                    "embed_out.weight"
                ].T
            },
        )

    def test_feedforward_is_the_exact_gelu(self, written):
        block = written.expected.transformer_layers[0]
        assert_feedforward_is_erf_gelu(block, block._feedforward)


# Pythia-160m's config.json.
_PYTHIA_160M = {
    "architectures": ["GPTNeoXForCausalLM"],
    "bos_token_id": 0,
    "eos_token_id": 0,
    "hidden_act": "gelu",
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048,
    "model_type": "gpt_neox",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "rotary_emb_base": 10000,
    "rotary_pct": 0.25,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "transformers_version": "4.24.0",
    "use_cache": True,
    "use_parallel_residual": True,
    "vocab_size": 50304,
}


def test_pythia_config_translates(tmp_path):
    config = _translate(tmp_path, _PYTHIA_160M)
    assert config == {
        "vocabulary_size": 50304,
        "num_layers": 12,
        "num_heads": 12,
        "hidden_dim": 768,
        "intermediate_dim": 3072,
        "dropout": 0.0,
        "rotary_percentage": 0.25,
        "rotary_max_wavelength": 10000,
        "layer_norm_epsilon": 1e-05,
        "max_sequence_length": 2048,
        "hidden_activation": "gelu",
        "tie_word_embeddings": False,
    }
    # Absent: transformers' defaults, exact and untied.
    fields = dict(_PYTHIA_160M)
    del fields["hidden_act"], fields["tie_word_embeddings"]
    assert _translate(tmp_path, fields) == config
    tanh = _translate(tmp_path, dict(_PYTHIA_160M, hidden_act="gelu_fast"))
    assert tanh["hidden_activation"] == "gelu_approximate"


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("hidden_act", "relu", "hidden_act='relu'"),
        ("use_parallel_residual", False, "use_parallel_residual=False"),
        ("rope_scaling", {"type": "linear", "factor": 2.0}, "'linear'"),
        ("partial_rotary_factor", 0.25, "partial_rotary_factor=0.25"),
    ],
)
def test_unsupported_values_are_named(
    neox_config, tmp_path, field, value, message
):
    fields = dict(neox_config, **{field: value})
    if value is None:
        del fields[field]
    with pytest.raises(PresetError, match=message):
        _translate(tmp_path, fields)
