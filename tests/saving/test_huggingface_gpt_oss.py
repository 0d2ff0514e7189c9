"""Hugging Face `gpt_oss` checkpoints against keras-hub's loader.

keras-hub has no GPT-OSS exporter, and its loader reads only MXFP4 experts
(`*_blocks`, `*_scales`), which ours refuses (it loads the unquantized
layout). So each case writes two checkpoints of one keras-hub backbone
whose expert weights are exactly MXFP4-representable: the unquantized one
that ours loads, and an MXFP4 twin (tensor names of keras-hub's
`convert_gpt_oss`) that keras-hub loads as the oracle. The twin's
`sliding_window` is one less than the checkpoint's: keras-hub's loader
passes Hugging Face's window (which counts the query) through to its
backbone (which does not).
"""

import json

import keras
import numpy as np
import pytest

from keras_nlp.models import Backbone
from keras_nlp.saving.preset_files import PresetError
from tests.models.backbone_checks import random_inputs
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import assert_same_weights
from tests.saving.huggingface_checkpoints import real_outputs
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.huggingface_checkpoints import write_checkpoint
from tests.saving.huggingface_moe_writers import llama_style_tensors
from tests.saving.huggingface_moe_writers import numpy

# E2M1 (4-bit float) codes 0..15: sign bit 3, exponent bits 1-2, mantissa
# bit 0; exponent 0 is subnormal (0 or 0.5).
_E2M1 = np.array(
    [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6],
    "float32",
)
# MXFP4 blocks of 32 values share one power-of-two scale (E8M0, bias 127).
_BLOCK = 32
_HF_WINDOW = 4


def _mxfp4(rng, experts, rows, columns):
    """Random MXFP4 `(blocks, scales)` of `(experts, rows, columns)` and
    their values."""
    blocks = columns // _BLOCK
    codes = rng.integers(0, 16, (experts, rows, blocks, _BLOCK))
    scales = rng.integers(122, 125, (experts, rows, blocks)).astype("uint8")
    values = _E2M1[codes] * np.exp2(scales.astype("float32") - 127)[..., None]
    # Two codes a byte, the first in the low nibble.
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype("uint8")
    return packed, scales, values.reshape(experts, rows, columns)


def _make_experts_mxfp4_exact(oracle, seed=0):
    """Replaces the expert kernels by MXFP4-representable values; returns
    each block's `(gate_up blocks, scales, down blocks, scales)`."""
    rng = np.random.default_rng(seed)
    quantized = []
    for layer in oracle.transformer_layers:
        experts = layer.sparse_moe_block.experts
        count, hidden, fused = experts.gate_up_proj.shape
        # Their layout is ours transposed: `(experts, out, in)`.
        gate_up = _mxfp4(rng, count, fused, hidden)
        down = _mxfp4(rng, count, hidden, fused // 2)
        experts.gate_up_proj.assign(gate_up[2].transpose(0, 2, 1))
        experts.down_proj.assign(down[2].transpose(0, 2, 1))
        quantized.append((gate_up[:2], down[:2]))
    return quantized


def _config(oracle):
    rope = {}
    if oracle.rope_scaling_factor != 1.0:
        rope["rope_scaling"] = {
            "rope_type": "yarn",
            "factor": oracle.rope_scaling_factor,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "original_max_position_embeddings": 4096,
            "truncate": False,
        }
    return {
        "model_type": "gpt_oss",
        "architectures": ["GptOssForCausalLM"],
        "vocab_size": oracle.vocabulary_size,
        "num_hidden_layers": oracle.num_layers,
        "num_attention_heads": oracle.num_query_heads,
        "num_key_value_heads": oracle.num_key_value_heads,
        "head_dim": oracle.head_dim,
        "hidden_size": oracle.hidden_dim,
        "intermediate_size": oracle.intermediate_dim,
        "num_local_experts": oracle.num_experts,
        "num_experts_per_tok": oracle.top_k,
        "experts_per_token": oracle.top_k,
        "rms_norm_eps": oracle.layer_norm_epsilon,
        "rope_theta": oracle.rope_max_wavelength,
        **rope,
        # keras-hub's backbone windows the odd blocks.
        "sliding_window": _HF_WINDOW,
        "layer_types": [
            "sliding_attention" if i % 2 else "full_attention"
            for i in range(oracle.num_layers)
        ],
        "swiglu_limit": 7.0,
        "attention_bias": True,
        "hidden_act": "silu",
        "initial_context_length": 4096,
        "router_aux_loss_coef": 0.9,
        "output_router_logits": False,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }


def _common_tensors(oracle):
    tensors = llama_style_tensors(oracle, attention_bias=True)
    for i, layer in enumerate(oracle.transformer_layers):
        prefix = f"model.layers.{i}."
        attention = layer.self_attention_layer
        moe = layer.sparse_moe_block
        tensors[prefix + "self_attn.sinks"] = numpy(attention.sinks)
        tensors[prefix + "mlp.router.weight"] = numpy(
            moe.router.router_dense.kernel
        ).T
        tensors[prefix + "mlp.router.bias"] = numpy(
            moe.router.router_dense.bias
        )
        for name in ("gate_up_proj_bias", "down_proj_bias"):
            tensors[f"{prefix}mlp.experts.{name}"] = numpy(
                getattr(moe.experts, name)
            )
    return tensors


def _tensors(oracle):
    """The unquantized checkpoint; makes the experts MXFP4-exact first and
    keeps their MXFP4 form for the twin."""
    oracle._mxfp4 = _make_experts_mxfp4_exact(oracle)
    tensors = _common_tensors(oracle)
    for i, layer in enumerate(oracle.transformer_layers):
        experts = layer.sparse_moe_block.experts
        for name in ("gate_up_proj", "down_proj"):
            tensors[f"model.layers.{i}.mlp.experts.{name}"] = numpy(
                getattr(experts, name)
            )
    return tensors


def _write_mxfp4_twin(oracle, path):
    """keras-hub's checkpoint of the same weights (MXFP4 experts)."""
    tensors = _common_tensors(oracle)
    for i, (gate_up, down) in enumerate(oracle._mxfp4):
        for name, (blocks, scales) in (
            ("gate_up_proj", gate_up),
            ("down_proj", down),
        ):
            prefix = f"model.layers.{i}.mlp.experts.{name}"
            tensors[prefix + "_blocks"] = blocks
            tensors[prefix + "_scales"] = scales
    config = _config(oracle)
    config["sliding_window"] = _HF_WINDOW - 1
    config["quantization_config"] = {"quant_method": "mxfp4"}
    tensor_writer(lambda _: config, lambda _: tensors)(oracle, path)


_SMALL = dict(
    vocabulary_size=96,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=32,
    num_experts=4,
    top_k=2,
)


class TestGptOssCheckpoints(HuggingFaceFamilyTests):
    # (2, 4) runs for Qwen MoE only (suite time).
    meshes = ((1, 8),)
    cases = [
        HFCase(
            "gpt_oss_yarn_window",
            "GptOssBackbone",
            dict(
                _SMALL,
                head_dim=16,
                rope_max_wavelength=150000,
                rope_scaling_factor=32.0,
                sliding_window=_HF_WINDOW,
            ),
            writer=tensor_writer(_config, _tensors),
        )
    ]

    @pytest.fixture(scope="class")
    @classmethod
    def checkpoint(cls, case, tmp_path_factory):
        import keras_hub

        path = tmp_path_factory.mktemp(case.name)
        twin = tmp_path_factory.mktemp(case.name + "_mxfp4")
        _write_mxfp4_twin(write_checkpoint(case, path), twin)
        theirs = keras_hub.models.Backbone.from_preset(str(twin))
        inputs = random_inputs(case.config["vocabulary_size"], length=10)
        expected = real_outputs(inputs, theirs(inputs))
        return path, theirs, inputs, expected

    def test_round_trip_is_bit_identical(self, case, checkpoint, tmp_path):
        # keras-hub cannot read the unquantized layout: the export is
        # checked against ours and the oracle's outputs.
        path, _, inputs, expected = checkpoint
        ours = Backbone.from_preset(str(path))
        ours.save_to_preset(str(tmp_path / "hf"), format="huggingface")
        written = json.loads((tmp_path / "hf" / "config.json").read_text())
        original = json.loads((path / "config.json").read_text())
        for key in ("sliding_window", "layer_types", "rope_scaling"):
            assert written[key] == original[key], key
        again = Backbone.from_preset(str(tmp_path / "hf"))
        mine, back = ours.get_config(), again.get_config()
        del mine["name"], back["name"]
        assert back == mine
        assert_same_weights(again, ours)
        np.testing.assert_allclose(
            real_outputs(inputs, again(inputs)),
            expected,
            atol=case.atol,
            rtol=case.atol,
        )


@pytest.fixture(scope="module")
def small_checkpoint(tmp_path_factory):
    """An untrained tiny checkpoint written by ours (config edits only)."""
    from keras_nlp.models.gpt_oss import GptOssBackbone

    path = tmp_path_factory.mktemp("gpt_oss_small")
    GptOssBackbone(**_SMALL, sliding_window=3).save_to_preset(
        str(path), format="huggingface"
    )
    return path


def _with_config(source, target, **changes):
    for file in source.iterdir():
        (target / file.name).write_bytes(file.read_bytes())
    config = json.loads((source / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (target / "config.json").write_text(json.dumps(config))
    return str(target)


def test_window_counts_the_query_like_hugging_face(small_checkpoint):
    config = json.loads((small_checkpoint / "config.json").read_text())
    assert config["sliding_window"] == 4
    assert config["layer_types"] == ["full_attention", "sliding_attention"]
    with keras.StatelessScope():
        model = Backbone.from_preset(str(small_checkpoint), load_weights=False)
    assert model.get_config()["sliding_window"] == 3


@pytest.mark.parametrize(
    "changes, message",
    [
        # OpenAI's checkpoints window the even blocks.
        (
            dict(layer_types=["sliding_attention", "full_attention"]),
            r"layer_types=\['sliding_attention', 'full_attention'\].*odd",
        ),
        (dict(layer_types=None), r"layer_types='absent \(with sliding_win"),
        (
            dict(quantization_config={"quant_method": "mxfp4"}),
            r"quantization_config=.*mxfp4.*dequantize",
        ),
        (
            dict(
                rope_scaling={
                    "rope_type": "yarn",
                    "factor": 32.0,
                    "beta_fast": 16.0,
                }
            ),
            r"rope_scaling.beta_fast=16.0 .* Supported: 32.0",
        ),
        (dict(swiglu_limit=10.0), r"swiglu_limit=10.0"),
    ],
    ids=["even_windows", "no_layer_types", "mxfp4", "yarn_beta", "limit"],
)
def test_unsupported_configs_name_the_field(
    small_checkpoint, tmp_path, changes, message
):
    path = _with_config(small_checkpoint, tmp_path, **changes)
    with pytest.raises(PresetError, match=message):
        Backbone.from_preset(path, load_weights=False)
