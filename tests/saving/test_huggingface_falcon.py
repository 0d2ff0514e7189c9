"""Hugging Face `falcon` checkpoints: Falcon-RW, Falcon-7B and Falcon-40B.

Falcon-RW is keras-hub's `FalconBackbone`: its checkpoint is written from a
random keras-hub model with `transformers`' names and layouts (Falcon-RW's
per-head `[query | key | value]` fused rows, as BLOOM's), and that model is
the oracle (see `tests/saving/huggingface_written.py`).

keras-hub has no Falcon-7B (multi-query, rotary, parallel with one norm, no
biases) or 40B/180B (grouped key/value heads, two norms): their tiny
checkpoints are written by `_falcon_tensors` from a random backbone of
ours built with the matching options, each fused tensor assembled by hand.
The loaded model must equal that backbone (options, weights, outputs), and
one block must equal a NumPy forward pass that reads the checkpoint's
tensors the way `transformers`' `FalconDecoderLayer` does (its
`_split_heads` per variant, rotate-half RoPE, exact GELU, parallel
residual), so the layouts and the computation are checked independently.
"""

import dataclasses
import json
import re

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from keras_nlp.models import Backbone
from keras_nlp.models.falcon import FalconBackbone
from keras_nlp.saving import PresetError
from keras_nlp.saving.huggingface import huggingface_config
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import random_inputs
from tests.models.backbone_checks import spec_of
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import assert_same_weights
from tests.saving.huggingface_checkpoints import randomize
from tests.saving.huggingface_checkpoints import real_outputs
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.huggingface_options import assert_round_trip
from tests.saving.huggingface_options import erf_gelu
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
    "fields, named",
    [
        # transformers' blocks are parallel under new_decoder_architecture.
        (
            dict(new_decoder_architecture=True, parallel_attn=False),
            "parallel_attn=False",
        ),
        # Without multi_query or new_decoder_architecture, one key/value
        # head per query head.
        (dict(num_kv_heads=1), "num_kv_heads=1"),
        # Two norms exist only under new_decoder_architecture.
        (
            dict(parallel_attn=True, num_ln_in_parallel_attn=2),
            "num_ln_in_parallel_attn=2",
        ),
        (
            dict(
                new_decoder_architecture=True,
                parallel_attn=True,
                num_kv_heads=3,
            ),
            "num_kv_heads=3",
        ),
        # Scaled RoPE.
        (
            dict(alibi=False, rope_scaling={"type": "linear", "factor": 2.0}),
            "rope_scaling.rope_type='linear'",
        ),
        (dict(activation="relu"), "activation='relu'"),
    ],
)
def test_what_transformers_cannot_build_is_named(
    falcon_config, tmp_path, fields, named
):
    with pytest.raises(PresetError, match=re.escape(named)):
        _translate(tmp_path, dict(falcon_config, **fields))


def test_left_out_fields_mean_transformers_defaults(tmp_path):
    # transformers' defaults are Falcon 7B's: multi-query, rotary (base
    # 10000), one norm per parallel block, no biases, 4 * hidden wide.
    config = _translate(
        tmp_path,
        {
            "model_type": "falcon",
            "vocab_size": 96,
            "hidden_size": 32,
            "num_attention_heads": 4,
            "num_hidden_layers": 2,
        },
    )
    assert {k: config[k] for k in _7B_OPTIONS} == _7B_OPTIONS
    assert config["intermediate_dim"] == 128


# === Falcon-7B and Falcon-40B: our backbone with options ===

_BASE = dict(
    vocabulary_size=96, num_layers=2, num_attention_heads=8, hidden_dim=64
)
_7B_OPTIONS = dict(
    num_key_value_heads=1,
    rotary_max_wavelength=10000.0,
    parallel_residual=True,
    shared_layer_norm=True,
    use_bias=False,
)
# name -> (our constructor arguments, config.json as the released
# checkpoints spell it, less the sizes). Falcon-7B's config has no
# ffn_hidden_size (4 * hidden) and no rope_theta (10000); the 40B one
# gets a base of 1000 so the NumPy check sees the field read. 4 key/value
# heads shard on the 4-way model axis.
_VARIANTS = {
    "falcon_7b": (
        dict(_BASE, intermediate_dim=256, **_7B_OPTIONS),
        {
            "alibi": False,
            "bias": False,
            "multi_query": True,
            "new_decoder_architecture": False,
            "parallel_attn": True,
        },
    ),
    "falcon_40b": (
        dict(
            _BASE,
            intermediate_dim=96,
            num_key_value_heads=4,
            rotary_max_wavelength=1000.0,
            parallel_residual=True,
            use_bias=False,
        ),
        {
            "alibi": False,
            "bias": False,
            "multi_query": True,
            "new_decoder_architecture": True,
            "num_kv_heads": 4,
            "parallel_attn": True,
            "ffn_hidden_size": 96,
            "rope_theta": 1000.0,
        },
    ),
}


def _falcon_tensors(model):
    """`transformers`' tensors of our Falcon `model`, by hand: each fused
    `query_key_value` holds, per key/value group, the group's query heads,
    then its key and value head, each `(head_dim, hidden)`."""

    def numpy(variable):
        return keras.ops.convert_to_numpy(variable)

    def norm(name, layer):
        tensors[name + ".weight"] = numpy(layer.gamma)
        tensors[name + ".bias"] = numpy(layer.beta)

    tensors = {
        "transformer.word_embeddings.weight": numpy(
            model.token_embedding.embeddings
        )
    }
    norm("transformer.ln_f", model.layer_norm)
    for i, block in enumerate(model.transformer_layers):
        prefix = f"transformer.h.{i}."
        attention = block.attention
        query = numpy(attention.query_dense.kernel)  # (hidden, N, D)
        key = numpy(attention.key_dense.kernel)  # (hidden, K, D)
        value = numpy(attention.value_dense.kernel)
        kv_heads = key.shape[1]
        group = query.shape[1] // kv_heads
        rows = []
        for g in range(kv_heads):
            for n in range(g * group, (g + 1) * group):
                rows.append(query[:, n].T)
            rows += [key[:, g].T, value[:, g].T]
        tensors[prefix + "self_attention.query_key_value.weight"] = (
            np.concatenate(rows)
        )
        tensors[prefix + "self_attention.dense.weight"] = numpy(
            attention.output_dense.kernel
        ).T
        norm(prefix + block.attention_norm.name, block.attention_norm)
        if block.feedforward_norm is not None:
            norm(prefix + block.feedforward_norm.name, block.feedforward_norm)
        tensors[prefix + "mlp.dense_h_to_4h.weight"] = numpy(
            block.intermediate_dense.kernel
        ).T
        tensors[prefix + "mlp.dense_4h_to_h.weight"] = numpy(
            block.output_dense.kernel
        ).T
    return {k: np.ascontiguousarray(v) for k, v in tensors.items()}


@dataclasses.dataclass(frozen=True)
class _Written:
    path: object
    options: dict
    fields: dict
    expected: object
    inputs: dict
    outputs: object
    # Ours, loaded from the checkpoint once for the tests that only read it.
    loaded: object


@pytest.fixture(scope="module", params=list(_VARIANTS))
def written(request, tmp_path_factory):
    config, variant_fields = _VARIANTS[request.param]
    keras.utils.set_random_seed(0)
    expected = randomize(FalconBackbone(**config))
    fields = {
        "model_type": "falcon",
        "architectures": ["FalconForCausalLM"],
        "vocab_size": config["vocabulary_size"],
        "hidden_size": config["hidden_dim"],
        "num_attention_heads": config["num_attention_heads"],
        "num_hidden_layers": config["num_layers"],
        "layer_norm_epsilon": 1e-5,
        "attention_dropout": 0.0,
        "hidden_dropout": 0.0,
        "apply_residual_connection_post_layernorm": False,
        "bos_token_id": 11,
        "eos_token_id": 11,
        "torch_dtype": "float32",
        **variant_fields,
    }
    path = tmp_path_factory.mktemp(request.param)
    save_file(_falcon_tensors(expected), str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(fields))
    inputs = random_inputs(config["vocabulary_size"], length=10)
    options = {k: v for k, v in config.items() if k not in _BASE}
    return _Written(
        path,
        options,
        fields,
        expected,
        inputs,
        real_outputs(inputs, expected(inputs)),
        Backbone.from_preset(str(path)),
    )


def test_loads_with_the_options(written):
    ours = written.loaded
    assert type(ours) is FalconBackbone
    config = ours.get_config()
    assert {k: config[k] for k in written.options} == written.options
    assert_same_weights(ours, written.expected)
    np.testing.assert_allclose(
        real_outputs(written.inputs, ours(written.inputs)),
        written.outputs,
        atol=1e-5,
        rtol=1e-5,
    )


def _layer_norm(x, tensors, name):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    normed = (x - mean) / np.sqrt(variance + 1e-5)
    return normed * tensors[name + ".weight"] + tensors[name + ".bias"]


def _rope(x, theta):
    """Rotate-half RoPE of `(batch, heads, seq, head_dim)` `x`."""
    dim = x.shape[-1]
    inverse = 1.0 / theta ** (np.arange(0, dim, 2) / dim)
    angles = np.arange(x.shape[2])[:, None] * inverse[None]
    angles = np.concatenate([angles, angles], -1)
    rotated = np.concatenate([-x[..., dim // 2 :], x[..., : dim // 2]], -1)
    return x * np.cos(angles) + rotated * np.sin(angles)


def _transformers_block(x, tensors, fields):
    """Block 0 of `transformers`' `FalconDecoderLayer`, in NumPy."""
    prefix = "transformer.h.0."
    batch, length, hidden = x.shape
    heads = fields["num_attention_heads"]
    dim = hidden // heads
    if fields["new_decoder_architecture"]:
        attention_in = _layer_norm(x, tensors, prefix + "ln_attn")
        mlp_in = _layer_norm(x, tensors, prefix + "ln_mlp")
    else:
        attention_in = mlp_in = _layer_norm(
            x, tensors, prefix + "input_layernorm"
        )
    fused = (
        attention_in
        @ tensors[prefix + "self_attention.query_key_value.weight"].T
    )
    if fields["new_decoder_architecture"]:
        kv = fields["num_kv_heads"]
        fused = fused.reshape(batch, length, kv, heads // kv + 2, dim)
        query = fused[:, :, :, :-2]
        key = np.broadcast_to(fused[:, :, :, -2:-1], query.shape)
        value = np.broadcast_to(fused[:, :, :, -1:], query.shape)
        query, key, value = (
            t.reshape(batch, length, heads, dim) for t in (query, key, value)
        )
    else:  # multi_query
        fused = fused.reshape(batch, length, heads + 2, dim)
        query, key, value = (
            fused[:, :, :-2],
            fused[:, :, -2:-1],
            fused[:, :, -1:],
        )
    query, key, value = (t.transpose(0, 2, 1, 3) for t in (query, key, value))
    theta = fields.get("rope_theta", 10000.0)
    query, key = _rope(query, theta), _rope(key, theta)
    logits = query @ key.transpose(0, 1, 3, 2) / np.sqrt(dim)
    logits = np.where(np.tri(length, dtype=bool), logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    attended = (weights @ value).transpose(0, 2, 1, 3).reshape(x.shape)
    attended = attended @ tensors[prefix + "self_attention.dense.weight"].T
    mlp = erf_gelu(mlp_in @ tensors[prefix + "mlp.dense_h_to_4h.weight"].T)
    mlp = mlp @ tensors[prefix + "mlp.dense_4h_to_h.weight"].T
    return x + attended + mlp


def test_a_block_computes_what_transformers_does(written):
    ours = written.loaded
    tensors = load_file(str(written.path / "model.safetensors"))
    x = np.random.default_rng(1).normal(0.0, 1.0, (2, 6, 64)).astype("float32")
    actual = keras.ops.convert_to_numpy(ours.transformer_layers[0](x))
    expected = _transformers_block(x.astype("float64"), tensors, written.fields)
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.multi_device
def test_loads_into_shards(written):
    distribution = keras.distribution.ModelParallel(
        layout_map=FalconBackbone.get_layout_map(make_mesh((2, 4))),
        batch_dim_name="batch",
    )
    with distribution.scope():
        ours = Backbone.from_preset(str(written.path))
        actual = real_outputs(written.inputs, ours(written.inputs))
    np.testing.assert_allclose(actual, written.outputs, atol=1e-5, rtol=1e-5)
    planned = {w.path: w.spec for w in ours.layout_plan.weights}
    for variable in ours.weights:
        assert spec_of(variable) == planned[variable.path], variable.path
    # One key/value head is replicated on the model axis; four shard.
    key = ours.transformer_layers[0].attention.key_dense.kernel
    kv_spec = "model" if written.options["num_key_value_heads"] == 4 else None
    assert spec_of(key) == ("batch", kv_spec, None)


def test_round_trip_is_bit_identical(written, tmp_path):
    fields = assert_round_trip(written.loaded, written.path, tmp_path)
    for key in sorted(set(fields) & set(written.fields) - {"torch_dtype"}):
        assert fields[key] == written.fields[key], key


def test_a_sequential_grouped_model_does_not_export(tmp_path):
    model = FalconBackbone(
        **dict(_BASE, num_layers=1),
        intermediate_dim=64,
        num_key_value_heads=2,
    )
    with pytest.raises(ValueError, match="num_key_value_heads=2"):
        model.save_to_preset(str(tmp_path), format="huggingface")
