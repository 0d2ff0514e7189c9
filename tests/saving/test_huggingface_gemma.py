"""Hugging Face `gemma` and `gemma2` checkpoints against keras-hub's loader.

keras-hub's Gemma exporter keeps only the first key/value head and writes
the query kernel in a non-Hugging Face order, so the checkpoints are
written by `tensor_writer`, named and laid out as keras-hub's
`convert_gemma` reads them (PyTorch `(out, in)` layouts).

keras-hub's `GemmaDecoderBlock` always scales queries by `head_dim ** -0.5`
(it ignores `query_head_dim_normalize`), while Hugging Face's Gemma 2 scales
them by `query_pre_attn_scalar ** -0.5` (Gemma 2 27B: 144, not its head
size 128). Ours follows Hugging Face, so the oracle cases keep
`query_pre_attn_scalar == head_dim`; the other values are checked by
`test_query_pre_attn_scalar` against the definition and by
`test_any_query_pre_attn_scalar` against keras-hub's model with its query
kernels rescaled (RoPE is linear, so scaling a query kernel by `c` scales
its logits by `c`).
"""

import json
import re
import shutil

import numpy as np
import pytest

from keras_nlp.models import Backbone
from keras_nlp.models.gemma import GemmaBackbone
from keras_nlp.models.gemma.gemma_huggingface import GEMMA
from keras_nlp.saving import PresetError
from keras_nlp.saving.huggingface import huggingface_config
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import assert_real_outputs_close
from tests.saving.huggingface_checkpoints import exported_config
from tests.saving.huggingface_checkpoints import real_outputs
from tests.saving.huggingface_checkpoints import tensor_writer


def gemma_tensors(oracle, prefix="model.", gemma2_norms=False, qk_norm=False):
    """`{name: array}` of a keras-hub Gemma-style backbone, HF layouts."""

    def array(variable):
        return np.asarray(variable.numpy())

    tensors = {
        prefix + "embed_tokens.weight": array(
            oracle.get_layer("token_embedding").embeddings
        ),
        prefix + "norm.weight": array(
            oracle.get_layer("final_normalization").scale
        ),
    }
    for i in range(oracle.num_layers):
        block = oracle.get_layer(f"decoder_block_{i}")
        layer = f"{prefix}layers.{i}."
        attention = block.attention
        for name, dense in (
            ("q", attention.query_dense),
            ("k", attention.key_dense),
            ("v", attention.value_dense),
        ):
            # (heads, hidden, head_dim) -> (heads * head_dim, hidden).
            kernel = array(dense.kernel).transpose(0, 2, 1)
            tensors[layer + f"self_attn.{name}_proj.weight"] = kernel.reshape(
                -1, kernel.shape[-1]
            )
        # (heads, head_dim, hidden) -> (hidden, heads * head_dim).
        output = array(attention.output_dense.kernel)
        tensors[layer + "self_attn.o_proj.weight"] = output.reshape(
            -1, output.shape[-1]
        ).T
        tensors[layer + "input_layernorm.weight"] = array(
            block.pre_attention_norm.scale
        )
        ffw_norm = "pre_feedforward" if gemma2_norms else "post_attention"
        tensors[layer + f"{ffw_norm}_layernorm.weight"] = array(
            block.pre_ffw_norm.scale
        )
        if gemma2_norms:
            tensors[layer + "post_attention_layernorm.weight"] = array(
                block.post_attention_norm.scale
            )
            tensors[layer + "post_feedforward_layernorm.weight"] = array(
                block.post_ffw_norm.scale
            )
        if qk_norm:
            tensors[layer + "self_attn.q_norm.weight"] = array(
                attention.query_norm.scale
            )
            tensors[layer + "self_attn.k_norm.weight"] = array(
                attention.key_norm.scale
            )
        for name, dense in (
            ("gate", block.gating_ffw),
            ("up", block.gating_ffw_2),
            ("down", block.ffw_linear),
        ):
            tensors[layer + f"mlp.{name}_proj.weight"] = array(dense.kernel).T
    return tensors


def _gemma_config(oracle):
    # Gemma 1.0's own spelling: `hidden_act: "gelu"`, no hidden_activation.
    return {
        "model_type": "gemma",
        "architectures": ["GemmaForCausalLM"],
        "vocab_size": oracle.vocabulary_size,
        "num_hidden_layers": oracle.num_layers,
        "num_attention_heads": oracle.num_query_heads,
        "num_key_value_heads": oracle.num_key_value_heads,
        "head_dim": oracle.head_dim,
        "hidden_size": oracle.hidden_dim,
        "intermediate_size": oracle.intermediate_dim // 2,
        "rms_norm_eps": oracle.layer_norm_epsilon,
        "hidden_act": "gelu",
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "max_position_embeddings": 8192,
        "bos_token_id": 2,
        "eos_token_id": 1,
        "pad_token_id": 0,
        "torch_dtype": "float32",
    }


def _gemma2_config(oracle):
    # Gemma 2's first configs (transformers 4.42): no layer_types.
    hidden_per_head = oracle.hidden_dim // oracle.num_query_heads
    return {
        **_gemma_config(oracle),
        "model_type": "gemma2",
        "architectures": ["Gemma2ForCausalLM"],
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": (
            oracle.head_dim
            if oracle.query_head_dim_normalize
            else hidden_per_head
        ),
        "attn_logit_softcapping": oracle.attention_logit_soft_cap,
        "final_logit_softcapping": oracle.final_logit_soft_cap,
        "sliding_window": oracle.sliding_window_size,
        "sliding_window_size": oracle.sliding_window_size,
        "cache_implementation": "hybrid",
    }


_SMALL = dict(
    vocabulary_size=96,
    num_layers=2,
    num_query_heads=4,
    hidden_dim=32,
    intermediate_dim=48,
    # Not hidden_dim // num_query_heads, so head layouts are exercised.
    head_dim=16,
)


class TestGemmaCheckpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "gemma_mqa",
            "GemmaBackbone",
            dict(_SMALL, num_key_value_heads=1),
            writer=tensor_writer(_gemma_config, gemma_tensors),
        )
    ]


class TestGemma2Checkpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "gemma2_window_soft_caps",
            "GemmaBackbone",
            dict(
                _SMALL,
                num_key_value_heads=2,
                use_post_ffw_norm=True,
                use_post_attention_norm=True,
                attention_logit_soft_cap=2.0,
                final_logit_soft_cap=30.0,
                use_sliding_window_attention=True,
                sliding_window_size=4,
            ),
            writer=tensor_writer(
                _gemma2_config,
                lambda oracle: gemma_tensors(oracle, gemma2_norms=True),
            ),
        )
    ]
    # The same sharding code as Gemma's; one mesh keeps the suite short.
    meshes = ((1, 8),)

    def test_any_query_pre_attn_scalar(self, case, checkpoint, tmp_path):
        # 12 is neither head_dim (16) nor hidden // heads (8): the
        # backbone's `query_pre_attn_scalar`. keras-hub scales queries by
        # head_dim ** -0.5; with its query kernels times
        # sqrt(head_dim / 12) it computes the scaling by 12 ** -0.5.
        path, theirs, inputs, _ = checkpoint
        scalar = 12
        shutil.copytree(path, tmp_path / "written")
        config_file = tmp_path / "written" / "config.json"
        config = json.loads(config_file.read_text())
        config_file.write_text(
            json.dumps(dict(config, query_pre_attn_scalar=scalar))
        )
        ours = Backbone.from_preset(str(tmp_path / "written"))
        assert ours.get_config()["query_pre_attn_scalar"] == scalar
        kernels = [
            theirs.get_layer(f"decoder_block_{i}").attention.query_dense.kernel
            for i in range(case.config["num_layers"])
        ]
        values = [np.array(kernel.numpy()) for kernel in kernels]
        factor = np.sqrt(case.config["head_dim"] / scalar)
        try:
            for kernel, value in zip(kernels, values, strict=True):
                kernel.assign(value * factor)
            expected = real_outputs(inputs, theirs(inputs))
        finally:
            for kernel, value in zip(kernels, values, strict=True):
                kernel.assign(value)
        assert_real_outputs_close(case, inputs, ours, expected)
        exported = exported_config(ours, tmp_path / "hf")
        assert exported["query_pre_attn_scalar"] == scalar
        again = Backbone.from_preset(str(tmp_path / "hf"))
        assert again.get_config() == dict(ours.get_config(), name=again.name)


# Config translation and its errors: `config.json` alone, no weights.


def _translate(tmp_path, config):
    (tmp_path / "config.json").write_text(json.dumps(config))
    _, owner, arguments = huggingface_config(Backbone, str(tmp_path))
    return owner.__name__, arguments


def _hf_config(model_type, **fields):
    config = {
        "model_type": model_type,
        "vocab_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "hidden_size": 32,
        "intermediate_size": 24,
    }
    if model_type != "gemma":
        config["query_pre_attn_scalar"] = 16
    config.update(fields)
    return {k: v for k, v in config.items() if v is not None}


def test_query_pre_attn_scalar(tmp_path):
    # Gemma 2 27B's case: the scalar is hidden_size // num_attention_heads.
    name, arguments = _translate(
        tmp_path, _hf_config("gemma2", query_pre_attn_scalar=8)
    )
    assert name == "GemmaBackbone"
    assert arguments["query_head_dim_normalize"] is False
    model = GemmaBackbone(**arguments)
    assert model.transformer_layers[0].attention.query_scale == 8**-0.5
    export = model.get_config()
    assert GEMMA.export_config(export)["query_pre_attn_scalar"] == 8
    # Any other positive value: the backbone's own argument, the same
    # attention (its query scale) and back on export.
    _, arguments = _translate(
        tmp_path, _hf_config("gemma2", query_pre_attn_scalar=100)
    )
    assert arguments["query_pre_attn_scalar"] == 100
    model = GemmaBackbone.from_config(GemmaBackbone(**arguments).get_config())
    assert model.transformer_layers[0].attention.query_scale == 100**-0.5
    export = GEMMA.export_config(model.get_config())
    assert export["query_pre_attn_scalar"] == 100
    with pytest.raises(PresetError, match="query_pre_attn_scalar"):
        _translate(tmp_path, _hf_config("gemma2", query_pre_attn_scalar=-4))


def test_gemma2_window_layers(tmp_path):
    _, arguments = _translate(
        tmp_path,
        _hf_config(
            "gemma2",
            sliding_window=8,
            layer_types=["sliding_attention", "full_attention"],
        ),
    )
    assert arguments["use_sliding_window_attention"] is True
    assert arguments["sliding_window_size"] == 8
    _, arguments = _translate(
        tmp_path,
        _hf_config("gemma2", layer_types=["full_attention"] * 2),
    )
    assert arguments["use_sliding_window_attention"] is False
    with pytest.raises(PresetError, match="windowed layers must be \\[0\\]"):
        _translate(
            tmp_path,
            _hf_config(
                "gemma2", layer_types=["full_attention", "sliding_attention"]
            ),
        )


@pytest.mark.parametrize(
    "model_type, fields, message",
    [
        ("gemma", {"hidden_activation": "gelu"}, "hidden_activation='gelu'"),
        ("gemma", {"hidden_act": "silu"}, "hidden_act='silu'"),
        ("gemma", {"tie_word_embeddings": False}, "tie_word_embeddings=False"),
        ("gemma", {"rope_theta": 500000.0}, "rope_theta=500000.0"),
        ("gemma", {"attention_bias": True}, "attention_bias=True"),
        (
            "gemma",
            {"rope_scaling": {"rope_type": "linear", "factor": 2.0}},
            "rope_scaling.rope_type='linear'",
        ),
        ("gemma", {"query_pre_attn_scalar": 16}, "query_pre_attn_scalar"),
        (
            "gemma2",
            {"sliding_window": 8, "sliding_window_size": 4},
            "sliding_window_size=4",
        ),
    ],
)
def test_unsupported_fields(tmp_path, model_type, fields, message):
    with pytest.raises(PresetError, match=re.escape(message)):
        _translate(tmp_path, _hf_config(model_type, **fields))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"use_post_attention_norm": True}, "use_post_ffw_norm=False"),
        ({"attention_logit_soft_cap": 50.0}, "attention_logit_soft_cap=50.0"),
        ({"use_sliding_window_attention": True}, "use_sliding_window"),
        ({"query_head_dim_normalize": False}, "query_head_dim_normalize"),
        ({"query_pre_attn_scalar": 12}, "query_pre_attn_scalar=12"),
    ],
)
def test_export_refuses_what_gemma_cannot_hold(options, message):
    config = GemmaBackbone(**dict(_SMALL, num_key_value_heads=1)).get_config()
    config.update(options)
    with pytest.raises(ValueError, match=re.escape(message)):
        GEMMA.export_config(config)
