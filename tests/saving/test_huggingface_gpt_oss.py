"""Hugging Face `gpt_oss` checkpoints against keras-hub's loader.

keras-hub has no GPT-OSS exporter, and its loader reads only MXFP4 experts
(`*_blocks`, `*_scales`). So each case writes two checkpoints of one
keras-hub backbone whose expert weights are exactly MXFP4-representable
(codes and scales picked at random, the float weights computed from them
here): the unquantized one, and an MXFP4 twin (tensor names of keras-hub's
`convert_gpt_oss`, config as OpenAI's) that keras-hub loads as the oracle.
Ours loads both. The twin's `sliding_window` is one less than the
checkpoint's: keras-hub's loader passes Hugging Face's window (which
counts the query) through to its backbone (which does not), so the oracle
computes the unquantized checkpoint's numbers.
"""

import json

import keras
import numpy as np
import pytest

from keras_nlp.models import Backbone
from keras_nlp.saving.preset_files import PresetError
from tests.models.backbone_checks import make_mesh
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
# OpenAI's checkpoints window the even blocks (keras-hub's loader ignores
# `layer_types`: only the weights of the twin are compared).
_EVEN = ["sliding_attention", "full_attention"]
_OPENAI_QUANTIZATION = {
    "modules_to_not_convert": [
        "model.layers.*.self_attn",
        "model.layers.*.mlp.router",
        "model.embed_tokens",
        "lm_head",
    ],
    "quant_method": "mxfp4",
}


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
    config["layer_types"] = _EVEN
    config["quantization_config"] = _OPENAI_QUANTIZATION
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
    def written(cls, case, tmp_path_factory):
        """The unquantized checkpoint, its MXFP4 twin and keras-hub's
        model of the twin."""
        import keras_hub

        path = tmp_path_factory.mktemp(case.name)
        twin = tmp_path_factory.mktemp(case.name + "_mxfp4")
        _write_mxfp4_twin(write_checkpoint(case, path), twin)
        theirs = keras_hub.models.Backbone.from_preset(str(twin))
        return path, twin, theirs

    @pytest.fixture(scope="class")
    @classmethod
    def checkpoint(cls, case, written):
        path, _, theirs = written
        inputs = random_inputs(case.config["vocabulary_size"], length=10)
        expected = real_outputs(inputs, theirs(inputs))
        return path, theirs, inputs, expected

    @pytest.fixture(scope="class")
    @classmethod
    def mxfp4_loaded(cls, written):
        """Ours, loaded from the MXFP4 twin on one device."""
        return Backbone.from_preset(str(written[1]))

    def test_mxfp4_loads_like_keras_hub(self, written, mxfp4_loaded):
        # keras-hub's converter dequantizes the same directory.
        _, twin, theirs = written
        assert_same_weights(mxfp4_loaded, theirs)
        config = mxfp4_loaded.get_config()
        # OpenAI's even windows, Hugging Face's count minus one.
        assert config["layer_types"] == _EVEN
        assert config["sliding_window"] == _HF_WINDOW - 2
        windows = [
            b.attention.sliding_window_size
            for b in mxfp4_loaded.transformer_layers
        ]
        assert windows == [_HF_WINDOW - 1, None]

    @pytest.mark.multi_device
    def test_mxfp4_loads_into_shards(self, written, mxfp4_loaded):
        # (2, 4) cuts the experts, and gate_up_proj's rows (the quantized
        # axis) mid-group: each device dequantizes only its box.
        distribution = keras.distribution.ModelParallel(
            layout_map=type(mxfp4_loaded).get_layout_map(make_mesh((2, 4))),
            batch_dim_name="batch",
        )
        with distribution.scope():
            ours = Backbone.from_preset(str(written[1]))
        assert_same_weights(ours, mxfp4_loaded)
        planned = {w.path: w.spec for w in ours.layout_plan.weights}
        assert planned[_GATE_UP.format(0)] == ("model", "batch", None)
        for variable in ours.weights:
            spec = tuple(variable.value.sharding.spec)
            spec += (None,) * (len(variable.shape) - len(spec))
            assert spec == planned[variable.path], variable.path

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


_GATE_UP = "transformer_layer_{}/sparse_moe_block/experts/gate_up_proj"


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
    target.mkdir(exist_ok=True)
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


def _layer_types(path):
    with keras.StatelessScope():
        model = Backbone.from_preset(path, load_weights=False)
    config = model.get_config()
    windows = [
        b.attention.sliding_window_size for b in model.transformer_layers
    ]
    return config["sliding_window"], config["layer_types"], windows


@pytest.mark.parametrize(
    "changes, expected",
    [
        # OpenAI's checkpoints, and GptOssConfig's default, window the
        # even blocks; the backbone's `layer_types` says so.
        (dict(layer_types=_EVEN), (3, _EVEN, [4, None])),
        (dict(layer_types=None), (3, _EVEN, [4, None])),
        # GptOssConfig's default window (128) when the field is absent.
        (dict(sliding_window=None), (127, None, [None, 128])),
        (dict(layer_types=["full_attention"] * 2), (None, None, [None, None])),
    ],
    ids=["even_windows", "no_layer_types", "no_window", "all_full"],
)
def test_window_patterns_load(small_checkpoint, tmp_path, changes, expected):
    path = _with_config(small_checkpoint, tmp_path, **changes)
    assert _layer_types(path) == expected


def test_absent_rope_scaling_is_gpt_oss_configs_yarn(
    small_checkpoint, tmp_path
):
    config = json.loads((small_checkpoint / "config.json").read_text())
    # Ours writes plain RoPE as null: absent would mean YaRN.
    assert config["rope_scaling"] is None
    path = _with_config(
        small_checkpoint, tmp_path / "absent", max_position_embeddings=4096
    )
    config = json.loads((tmp_path / "absent" / "config.json").read_text())
    del config["rope_scaling"]
    (tmp_path / "absent" / "config.json").write_text(json.dumps(config))
    with keras.StatelessScope():
        model = Backbone.from_preset(path, load_weights=False)
    assert model.get_config()["rope_scaling_factor"] == 32.0
    # `transformers` then takes `max_position_embeddings` as YaRN's
    # original length, which GPT-OSS's YaRN does not use.
    config["max_position_embeddings"] = 131072
    (tmp_path / "absent" / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        PresetError,
        match=r"original_max_position_embeddings=131072 .*no rope_scaling",
    ):
        Backbone.from_preset(path, load_weights=False)


def test_even_windows_export_their_layer_types(small_checkpoint, tmp_path):
    path = _with_config(small_checkpoint, tmp_path / "even", layer_types=_EVEN)
    ours = Backbone.from_preset(path)
    ours.save_to_preset(str(tmp_path / "hf"), format="huggingface")
    written = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert written["layer_types"] == _EVEN
    assert written["sliding_window"] == 4
    assert "quantization_config" not in written
    again = Backbone.from_preset(str(tmp_path / "hf"))
    assert again.get_config()["layer_types"] == _EVEN
    assert_same_weights(again, ours)


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            dict(layer_types=["sliding_attention", "local"]),
            r"layer_types=\['sliding_attention', 'local'\].*a list of 2 of",
        ),
        (
            dict(layer_types=["full_attention"]),
            r"layer_types=\['full_attention'\] .*a list of 2 of",
        ),
        (dict(sliding_window=1), r"sliding_window=1 .*>= 2"),
        (
            dict(quantization_config={"quant_method": "fp8"}),
            r"quantization_config=\{'quant_method': 'fp8'\}.*'mxfp4'",
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
        (dict(swiglu_alpha=1.0), r"swiglu_alpha=1.0 .* Supported: 1.702"),
    ],
    ids=[
        "unknown_layer_type",
        "layer_types_length",
        "window_1",
        "fp8",
        "yarn_beta",
        "limit",
        "alpha",
    ],
)
def test_unsupported_configs_name_the_field(
    small_checkpoint, tmp_path, changes, message
):
    path = _with_config(small_checkpoint, tmp_path, **changes)
    with pytest.raises(PresetError, match=message):
        Backbone.from_preset(path, load_weights=False)


# === MXFP4 ===


def test_mxfp4_dequantizes_codes_and_scales_exactly():
    from keras_nlp.saving.huggingface import dequantize_mxfp4

    rng = np.random.default_rng(1)
    blocks, scales, values = _mxfp4(rng, 3, 5, 64)
    # Extreme scales: the smallest (subnormal in float32) and NaN.
    scales[0, 0, 0] = 0
    scales[0, 0, 1] = 255
    values[0, 0, :32] = _E2M1[_codes(blocks[0, 0, 0])] * np.float32(2.0**-127)
    got = dequantize_mxfp4(blocks, scales)
    assert got.shape == (3, 5, 64) and got.dtype.name == "float32"
    assert np.isnan(got[0, 0, 32:]).all()
    got[0, 0, 32:] = values[0, 0, 32:]
    np.testing.assert_array_equal(got, values)
    # bfloat16 holds every MXFP4 value exactly.
    np.testing.assert_array_equal(
        dequantize_mxfp4(blocks[1:], scales[1:], "bfloat16").astype("float32"),
        values[1:],
    )


def _codes(packed):
    """The E2M1 codes of packed bytes, in order (low nibble first)."""
    return np.stack([packed & 15, packed >> 4], axis=-1).reshape(-1)


@pytest.mark.parametrize(
    "box",
    [
        ((0, 3), (0, 96), (0, 5)),
        ((1, 2), (40, 70), (2, 4)),
        ((0, 3), (31, 33), (4, 5)),
        ((2, 3), (64, 96), (0, 1)),
    ],
)
def test_mxfp4_reads_only_the_groups_of_a_box(box):
    from keras_nlp.saving.huggingface import MXFP4
    from keras_nlp.saving.huggingface.checkpoint import TensorInfo

    # T (3, 96, 5) is stored transposed: blocks (3, 5, 3 groups, 16).
    blocks, scales, values = _mxfp4(np.random.default_rng(2), 3, 5, 96)
    arrays = {"w_blocks": blocks, "w_scales": scales}
    infos = {
        name: TensorInfo("f", name, array.shape, "uint8")
        for name, array in arrays.items()
    }
    tensor, problems = MXFP4.find("w", infos)
    assert problems == [] and tensor.shape == (3, 96, 5)
    reads = []

    def read(name, their_box):
        reads.append((name, their_box))
        return arrays[name][tuple(slice(a, b) for a, b in their_box)]

    got = tensor.read(read, box)
    expected = values.transpose(0, 2, 1)[tuple(slice(a, b) for a, b in box)]
    np.testing.assert_array_equal(got.astype("float32"), expected)
    experts, rows, columns = box
    groups = (rows[0] // 32, -(-rows[1] // 32))
    assert reads == [
        ("w_blocks", (experts, columns, groups, (0, 16))),
        ("w_scales", (experts, columns, groups)),
    ]


def _quantized_copy(source, target, layer_tensors):
    """`source` with layer 0's `gate_up_proj` replaced by `layer_tensors`
    (name suffix -> array) and MXFP4's `quantization_config`."""
    from safetensors.numpy import load_file
    from safetensors.numpy import save_file

    _with_config(source, target, quantization_config=_OPENAI_QUANTIZATION)
    tensors = load_file(str(target / "model.safetensors"))
    name = "model.layers.0.mlp.experts.gate_up_proj"
    del tensors[name]
    for suffix, array in layer_tensors.items():
        tensors[name + suffix] = array
    save_file(tensors, str(target / "model.safetensors"))
    return str(target)


# `gate_up_proj` of `_SMALL`: (4 experts, 32 hidden, 64) is stored as
# blocks (4, 64, 1, 16) and scales (4, 64, 1).
_BLOCKS = np.zeros((4, 64, 1, 16), "uint8")
_SCALES = np.full((4, 64, 1), 127, "uint8")


@pytest.mark.parametrize(
    "layer_tensors, message",
    [
        (
            {"_blocks": _BLOCKS, "_scales": _SCALES[:, :32]},
            r"gate_up_proj_scales has shape \(4, 32, 1\) and dtype uint8; "
            r"the MXFP4 scales of .*gate_up_proj_blocks \(4, 64, 1, 16\) "
            r"are uint8 of shape \(4, 64, 1\)",
        ),
        (
            {"_blocks": _BLOCKS[..., :8], "_scales": _SCALES},
            r"gate_up_proj_blocks has shape \(4, 64, 1, 8\) and dtype "
            r"uint8; MXFP4 blocks are uint8 of shape \(..., columns, "
            r"groups, 16\)",
        ),
        (
            {"_blocks": _BLOCKS},
            r"gate_up_proj_scales: missing \(the MXFP4 scales of .*"
            r"expected shape \(4, 64, 1\)\)",
        ),
        (
            # Hidden 64 where the model has 32: the dequantized shape.
            {
                "_blocks": np.zeros((4, 64, 2, 16), "uint8"),
                "_scales": np.zeros((4, 64, 2), "uint8"),
            },
            r"gate_up_proj_blocks \+ .*gate_up_proj_scales \(MXFP4 "
            r".*gate_up_proj, dequantized\) has shape \(4, 64, 64\), "
            r"expected \(4, 32, 64\)",
        ),
    ],
    ids=["scales_shape", "blocks_shape", "no_scales", "hidden"],
)
def test_malformed_mxfp4_names_the_tensors(
    small_checkpoint, tmp_path, layer_tensors, message
):
    path = _quantized_copy(small_checkpoint, tmp_path, layer_tensors)
    with pytest.raises(PresetError, match=message):
        Backbone.from_preset(path)
