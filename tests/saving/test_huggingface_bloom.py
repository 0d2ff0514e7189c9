"""Hugging Face `bloom` checkpoints against keras-hub's BLOOM.

keras-hub has no Hugging Face loader for BLOOM: the checkpoint is written
from a random keras-hub `BloomBackbone` with `transformers`' names and
layouts (`query_key_value` rows grouped per head as `[query | key |
value]`), and that model is the oracle (see
`tests/saving/huggingface_written.py`).
"""

import json

import pytest

from keras_nlp.models import Backbone
from keras_nlp.saving import PresetError
from keras_nlp.saving.huggingface import huggingface_config
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.huggingface_written import WrittenCheckpointTests
from tests.saving.huggingface_written import per_head_fused


def _config(oracle):
    return {
        "model_type": "bloom",
        "architectures": ["BloomForCausalLM"],
        "vocab_size": oracle.vocabulary_size,
        "n_layer": oracle.num_layers,
        "n_head": oracle.num_heads,
        "hidden_size": oracle.hidden_dim,
        "layer_norm_epsilon": oracle.layer_norm_epsilon,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
        "apply_residual_connection_post_layernorm": False,
        # Megatron leftovers of bigscience's configs.
        "pretraining_tp": 1,
        "slow_but_exact": False,
        "masked_softmax_fusion": True,
        "unk_token_id": 0,
        "torch_dtype": "float32",
    }


def _tensors(oracle):
    def norm(name, layer):
        tensors[name + ".weight"] = layer.gamma
        tensors[name + ".bias"] = layer.beta

    def dense(name, layer):
        tensors[name + ".weight"] = layer.kernel.numpy().T
        tensors[name + ".bias"] = layer.bias

    tensors = {
        "transformer.word_embeddings.weight": oracle.token_embedding.embeddings
    }
    norm("transformer.word_embeddings_layernorm", oracle.embeddings_layer_norm)
    norm("transformer.ln_f", oracle.layer_norm)
    for i, layer in enumerate(oracle.transformer_layers):
        prefix = f"transformer.h.{i}."
        attention = layer._self_attention_layer
        weight, bias = per_head_fused(
            (
                attention._query_dense,
                attention._key_dense,
                attention._value_dense,
            ),
            oracle.num_heads,
        )
        tensors[prefix + "self_attention.query_key_value.weight"] = weight
        tensors[prefix + "self_attention.query_key_value.bias"] = bias
        dense(prefix + "self_attention.dense", attention._output_dense)
        norm(prefix + "input_layernorm", layer._pre_attention_layernorm)
        norm(
            prefix + "post_attention_layernorm", layer._post_attention_layernorm
        )
        dense(prefix + "mlp.dense_h_to_4h", layer._mlp_intermediate_dense)
        dense(prefix + "mlp.dense_4h_to_h", layer._mlp_output_dense)
    return tensors


_CASE = HFCase(
    "bloom",
    "BloomBackbone",
    dict(
        vocabulary_size=96,
        num_layers=2,
        num_heads=4,
        hidden_dim=32,
        intermediate_dim=128,
    ),
    writer=tensor_writer(_config, _tensors),
)


class TestBloomCheckpoints(WrittenCheckpointTests):
    cases = [_CASE]
    meshes = ((2, 4),)


@pytest.fixture(scope="module")
def bloom_config():
    import keras_hub

    return _config(keras_hub.models.BloomBackbone(**_CASE.config))


def _translate(tmp_path, fields):
    (tmp_path / "config.json").write_text(json.dumps(fields))
    return huggingface_config(Backbone, str(tmp_path))[2]


def test_config_translates(bloom_config, tmp_path):
    expected = dict(_CASE.config, dropout=0.0, layer_norm_epsilon=1e-5)
    assert _translate(tmp_path, bloom_config) == expected
    fields = dict(bloom_config)
    fields["num_hidden_layers"] = fields.pop("n_layer")
    assert _translate(tmp_path, fields) == expected


@pytest.mark.parametrize(
    "field, value",
    [
        ("apply_residual_connection_post_layernorm", True),
        ("tie_word_embeddings", False),
        ("num_hidden_layers", 3),
    ],
)
def test_unsupported_values_are_named(bloom_config, tmp_path, field, value):
    with pytest.raises(PresetError, match=f"{field}={value!r}"):
        _translate(tmp_path, dict(bloom_config, **{field: value}))


def test_a_mis_shaped_fused_tensor_is_named(tmp_path):
    from safetensors.numpy import load_file
    from safetensors.numpy import save_file

    from tests.saving.huggingface_checkpoints import write_checkpoint

    write_checkpoint(_CASE, tmp_path)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    name = "transformer.h.1.self_attention.query_key_value.weight"
    tensors[name] = tensors[name][:-8]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(PresetError) as error:
        Backbone.from_preset(str(tmp_path))
    message = str(error.value)
    assert f"{name} " in message and "(88, 32)" in message
    assert "expected (96, 32)" in message
