"""Hugging Face `opt` checkpoints against keras-hub's OPT and NumPy.

keras-hub has no Hugging Face loader for OPT: the checkpoint is written
from a random keras-hub `OPTBackbone` with `transformers`' names and
layouts (the position table with fairseq's two leading rows), and that
model is the oracle (see `tests/saving/huggingface_written.py`).

keras-hub cannot build OPT-350M (post-LayerNorm blocks, a token table
narrower than the blocks with `project_in`/`project_out`): its tiny
checkpoint is random tensors under `transformers`' names, and the oracle
is a NumPy forward pass of `transformers`' OPT written below.
"""

import json
import shutil

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from keras_nlp.models import Backbone
from keras_nlp.saving import PresetError
from keras_nlp.saving.huggingface import huggingface_config
from tests.models.backbone_checks import make_mesh
from tests.models.backbone_checks import spec_of
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import assert_same_weights
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
    assert _translate(tmp_path, opt_config) == dict(
        _CASE.config,
        dropout=0.1,
        normalize_first=True,
        token_embedding_dim=None,
    )


@pytest.mark.parametrize(
    "field, value",
    [
        # Pre-LayerNorm blocks without the final LayerNorm.
        ("_remove_final_layer_norm", True),
        ("enable_bias", False),
        ("layer_norm_elementwise_affine", False),
        ("activation_function", "gelu"),
    ],
)
def test_unsupported_values_are_named(opt_config, tmp_path, field, value):
    with pytest.raises(PresetError, match=f"{field}={value!r}"):
        _translate(tmp_path, dict(opt_config, **{field: value}))


# === OPT-350M: post-LayerNorm blocks and embedding projections ===

# A tiny OPT-350M: a token table (16) narrower than the blocks (32).
V, L, N, H, F, E, P = 64, 2, 4, 32, 48, 16, 16
_DECODER = "model.decoder."
_OPT_350M_FIELDS = {
    "model_type": "opt",
    "architectures": ["OPTForCausalLM"],
    "vocab_size": V,
    "num_hidden_layers": L,
    "num_attention_heads": N,
    "hidden_size": H,
    "word_embed_proj_dim": E,
    "ffn_dim": F,
    "max_position_embeddings": P,
    "do_layer_norm_before": False,
    "_remove_final_layer_norm": False,
    "activation_function": "relu",
    "dropout": 0.1,
    "attention_dropout": 0.0,
    "layerdrop": 0.0,
    "init_std": 0.02,
    "prefix": "</s>",
    "torch_dtype": "float32",
}
# Right padding: `transformers` counts positions from the first real token,
# we from the first slot; on right-padded rows both agree.
_INPUTS = {
    "token_ids": np.array(
        [[5, 9, 2, 7, 63, 1], [3, 3, 40, 8, 0, 0]], dtype="int32"
    ),
    "padding_mask": np.array(
        [[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype="int32"
    ),
}


def _opt_350m_tensors(seed=0):
    """Random tensors of every `transformers` OPT-350M weight."""
    rng = np.random.default_rng(seed)

    def normal(*shape, scale=0.3):
        return (scale * rng.standard_normal(shape)).astype("float32")

    tensors = {
        _DECODER + "embed_tokens.weight": normal(V, E),
        _DECODER + "embed_positions.weight": normal(P + 2, H),
        _DECODER + "project_in.weight": normal(H, E),
        _DECODER + "project_out.weight": normal(E, H),
    }
    shapes = {
        "self_attn.q_proj": (H, H),
        "self_attn.k_proj": (H, H),
        "self_attn.v_proj": (H, H),
        "self_attn.out_proj": (H, H),
        "fc1": (F, H),
        "fc2": (H, F),
    }
    for i in range(L):
        layer = f"{_DECODER}layers.{i}."
        for name, shape in shapes.items():
            tensors[layer + name + ".weight"] = normal(*shape)
            tensors[layer + name + ".bias"] = normal(shape[0], scale=0.1)
        for norm in ("self_attn_layer_norm", "final_layer_norm"):
            tensors[layer + norm + ".weight"] = 1 + normal(H, scale=0.1)
            tensors[layer + norm + ".bias"] = normal(H, scale=0.1)
    return tensors


def _layer_norm(x, weight, bias, epsilon=1e-5):
    centered = x - x.mean(-1, keepdims=True)
    variance = (centered**2).mean(-1, keepdims=True)
    return centered / np.sqrt(variance + epsilon) * weight + bias


def _numpy_opt_350m(t, token_ids, padding_mask):
    """`transformers`' OPT decoder with `do_layer_norm_before=False` and
    `word_embed_proj_dim != hidden_size`, in float64: embeddings ->
    project_in -> + positions -> post-LayerNorm blocks -> project_out."""
    t = {name: value.astype("float64") for name, value in t.items()}

    def linear(x, name, bias=True):
        y = x @ t[name + ".weight"].T
        return y + t[name + ".bias"] if bias else y

    batch, length = token_ids.shape
    positions = np.cumsum(padding_mask, 1) * padding_mask - 1
    x = t[_DECODER + "embed_tokens.weight"][token_ids]
    x = linear(x, _DECODER + "project_in", bias=False)
    x = x + t[_DECODER + "embed_positions.weight"][positions + 2]
    allowed = np.tril(np.ones((length, length), bool))[None] & (
        padding_mask[:, None, :] > 0
    )

    def heads(y):
        return y.reshape(batch, length, N, H // N).transpose(0, 2, 1, 3)

    for i in range(L):
        layer = f"{_DECODER}layers.{i}."
        query = heads(linear(x, layer + "self_attn.q_proj")) * (H // N) ** -0.5
        key = heads(linear(x, layer + "self_attn.k_proj"))
        value = heads(linear(x, layer + "self_attn.v_proj"))
        scores = np.where(
            allowed[:, None], query @ key.transpose(0, 1, 3, 2), -np.inf
        )
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        attended = (probs @ value).transpose(0, 2, 1, 3).reshape(x.shape)
        x = x + linear(attended, layer + "self_attn.out_proj")
        x = _layer_norm(
            x,
            t[layer + "self_attn_layer_norm.weight"],
            t[layer + "self_attn_layer_norm.bias"],
        )
        fed = linear(np.maximum(linear(x, layer + "fc1"), 0), layer + "fc2")
        x = _layer_norm(
            x + fed,
            t[layer + "final_layer_norm.weight"],
            t[layer + "final_layer_norm.bias"],
        )
    return linear(x, _DECODER + "project_out", bias=False)


@pytest.fixture(scope="module")
def opt_350m(tmp_path_factory):
    """The checkpoint's directory, its tensors, and our unsharded outputs
    (at the real tokens) of it."""
    path = tmp_path_factory.mktemp("opt_350m")
    tensors = _opt_350m_tensors()
    save_file(tensors, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(_OPT_350M_FIELDS))
    ours = Backbone.from_preset(str(path))
    real = _INPUTS["padding_mask"] > 0
    outputs = keras.ops.convert_to_numpy(ours(_INPUTS))[real]
    return path, tensors, ours, outputs


def test_opt_350m_loads_and_equals_numpy(opt_350m):
    path, tensors, ours, outputs = opt_350m
    config = ours.get_config()
    assert type(ours).__name__ == "OPTBackbone"
    assert config["normalize_first"] is False
    assert config["token_embedding_dim"] == E
    assert ours.layer_norm is None
    assert ours.project_out.kernel.shape == (H, E)
    real = _INPUTS["padding_mask"] > 0
    expected = _numpy_opt_350m(tensors, **_INPUTS)[real]
    assert outputs.shape == (10, E)
    np.testing.assert_allclose(outputs, expected, atol=1e-5, rtol=1e-5)
    # The tied logits read the narrow table.
    hidden = ours(_INPUTS)
    logits = keras.ops.convert_to_numpy(
        ours.token_embedding(hidden, reverse=True)
    )[real]
    np.testing.assert_allclose(
        logits,
        expected @ tensors[_DECODER + "embed_tokens.weight"].T,
        atol=1e-4,
        rtol=1e-5,
    )


def test_opt_350m_ignores_a_stored_final_layer_norm(opt_350m, tmp_path):
    # Our post-norm model has no final LayerNorm, as `transformers`' has
    # none: a checkpoint that still stores one loads without it.
    path, tensors, ours, _ = opt_350m
    extra = {
        _DECODER + "final_layer_norm.weight": np.ones(H, "float32"),
        _DECODER + "final_layer_norm.bias": np.zeros(H, "float32"),
    }
    save_file({**tensors, **extra}, str(tmp_path / "model.safetensors"))
    shutil.copy(path / "config.json", tmp_path / "config.json")
    assert_same_weights(Backbone.from_preset(str(tmp_path)), ours)


@pytest.mark.multi_device
def test_opt_350m_loads_into_shards(opt_350m):
    path, _, _, outputs = opt_350m
    cls = type(Backbone.from_preset(str(path), load_weights=False))
    distribution = keras.distribution.ModelParallel(
        layout_map=cls.get_layout_map(make_mesh((2, 4))),
        batch_dim_name="batch",
    )
    with distribution.scope():
        sharded = Backbone.from_preset(str(path))
        actual = keras.ops.convert_to_numpy(sharded(_INPUTS))
    real = _INPUTS["padding_mask"] > 0
    np.testing.assert_allclose(actual[real], outputs, atol=1e-5, rtol=1e-5)
    planned = {w.path: w.spec for w in sharded.layout_plan.weights}
    for variable in sharded.weights:
        assert spec_of(variable) == planned[variable.path], variable.path
    # The projections are sharded, not replicated.
    assert planned["embeddings/project_in/kernel"] == ("batch", "model")
    assert planned["project_out/kernel"] == ("model", "batch")


def test_opt_350m_round_trip_is_bit_identical(opt_350m, tmp_path):
    path, tensors, ours, _ = opt_350m
    ours.save_to_preset(str(tmp_path), format="huggingface")
    again = Backbone.from_preset(str(tmp_path))
    assert_same_weights(again, ours)
    rewritten = load_file(str(tmp_path / "model.safetensors"))
    assert sorted(rewritten) == sorted(tensors)
    for name, value in tensors.items():
        # Our table has no rows before position 0: written as zeros.
        rows = slice(2, None) if name == _POSITIONS else slice(None)
        np.testing.assert_array_equal(rewritten[name][rows], value[rows])
    fields = json.loads((tmp_path / "config.json").read_text())
    for key in ("do_layer_norm_before", "word_embed_proj_dim", "hidden_size"):
        assert fields[key] == _OPT_350M_FIELDS[key], key
