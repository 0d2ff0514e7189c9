"""Hugging Face `falcon` checkpoints (Falcon-RW) against keras-hub's Falcon.

keras-hub has no Hugging Face loader for Falcon: the checkpoint is written
from a random keras-hub `FalconBackbone` with `transformers`' names and
layouts (Falcon-RW's per-head `[query | key | value]` fused rows, as
BLOOM's), and that model is the oracle (see
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
    # tiiuae/falcon-rw-1b's fields.
    return {
        "model_type": "falcon",
        "architectures": ["FalconForCausalLM"],
        "vocab_size": oracle.vocabulary_size,
        "num_hidden_layers": oracle.num_layers,
        "num_attention_heads": oracle.num_attention_heads,
        "hidden_size": oracle.hidden_dim,
        "ffn_hidden_size": oracle.intermediate_dim,
        "layer_norm_epsilon": oracle.layer_norm_epsilon,
        "alibi": True,
        "bias": True,
        "multi_query": False,
        "new_decoder_architecture": False,
        "parallel_attn": False,
        "apply_residual_connection_post_layernorm": False,
        "attention_dropout": 0.0,
        "hidden_dropout": 0.0,
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
    norm("transformer.ln_f", oracle.final_layernorm)
    for i, layer in enumerate(oracle.transformer_layers):
        prefix = f"transformer.h.{i}."
        attention = layer.attention_layer
        weight, bias = per_head_fused(
            (attention.query_dense, attention.key_dense, attention.value_dense),
            oracle.num_attention_heads,
        )
        tensors[prefix + "self_attention.query_key_value.weight"] = weight
        tensors[prefix + "self_attention.query_key_value.bias"] = bias
        dense(prefix + "self_attention.dense", attention.output_dense)
        norm(prefix + "input_layernorm", layer.input_layernorm)
        norm(
            prefix + "post_attention_layernorm", layer.post_attention_layernorm
        )
        dense(prefix + "mlp.dense_h_to_4h", layer.dense_h_to_4h)
        dense(prefix + "mlp.dense_4h_to_h", layer.dense_4h_to_h)
    return tensors


_CASE = HFCase(
    "falcon_rw",
    "FalconBackbone",
    dict(
        vocabulary_size=96,
        num_layers=2,
        num_attention_heads=4,
        hidden_dim=32,
        intermediate_dim=48,
    ),
    writer=tensor_writer(_config, _tensors),
)


class TestFalconCheckpoints(WrittenCheckpointTests):
    cases = [_CASE]
    meshes = ((2, 4),)


@pytest.fixture(scope="module")
def falcon_config():
    import keras_hub

    return _config(keras_hub.models.FalconBackbone(**_CASE.config))


def _translate(tmp_path, fields):
    (tmp_path / "config.json").write_text(json.dumps(fields))
    return huggingface_config(Backbone, str(tmp_path))[2]


@pytest.mark.parametrize(
    "field, value",
    [
        # Falcon 7B, 40B/180B, and the rotary models.
        ("multi_query", True),
        ("new_decoder_architecture", True),
        ("parallel_attn", True),
        ("alibi", False),
        ("bias", False),
        ("num_kv_heads", 1),
        ("activation", "relu"),
    ],
)
def test_other_variants_are_named(falcon_config, tmp_path, field, value):
    with pytest.raises(PresetError, match=f"{field}={value!r}"):
        _translate(tmp_path, dict(falcon_config, **{field: value}))


def test_left_out_fields_mean_transformers_defaults(falcon_config, tmp_path):
    # transformers' defaults are Falcon 7B's: multi-query, rotary.
    fields = dict(falcon_config)
    del fields["multi_query"]
    with pytest.raises(PresetError, match="multi_query=True"):
        _translate(tmp_path, fields)
