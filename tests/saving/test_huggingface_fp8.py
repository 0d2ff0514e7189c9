"""Hugging Face checkpoints with block-scaled FP8 weights (`transformers`'
"fp8", as `Qwen/Qwen3-8B-FP8` and DeepSeek-V3 are published).

Each case saves a tiny random backbone of ours as a Hugging Face
checkpoint, then stores every linear weight as the publisher's tool does:
float8 e4m3 codes beside a float32 `weight_scale_inv` per 16 x 16 block
(`weight_block_size: [16, 16]`; widths 40 and 24 leave partial blocks),
embeddings, norms, routers and `lm_head` unquantized. Its twin holds the
dequantized values (computed here in NumPy, float32) as plain tensors
under the same config without `quantization_config`, so the twin loads
through the float path: the FP8 checkpoint must give the same variables
bit for bit, unsharded and in the shards of a (2, 4) mesh.
"""

import json
import re

import keras
import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from keras_nlp.models import Backbone
from keras_nlp.models import DeepSeekV3Backbone
from keras_nlp.models import Llama3Backbone
from keras_nlp.models import Qwen3Backbone
from keras_nlp.models import Qwen3MoeBackbone
from keras_nlp.saving import LossyConversionWarning
from keras_nlp.saving import PresetError
from keras_nlp.saving.huggingface import Fp8
from keras_nlp.saving.huggingface import dequantize_fp8
from keras_nlp.saving.huggingface.checkpoint import TensorInfo
from tests.models.backbone_checks import make_mesh
from tests.saving.huggingface_checkpoints import assert_follows_plan
from tests.saving.huggingface_checkpoints import assert_same_weights
from tests.saving.huggingface_checkpoints import randomize

BLOCK = 16
QUANTIZATION = {
    "quant_method": "fp8",
    "fmt": "e4m3",
    "activation_scheme": "dynamic",
    "weight_block_size": [BLOCK, BLOCK],
}
WEIGHTS = "model.safetensors"
# The linears the publisher quantizes (not the MoE router `mlp.gate`).
QUANTIZED = re.compile(
    r"model\.layers\.\d+\.(self_attn\.([qkvo]|q_[ab]|kv_a|kv_b)_proj"
    r"(_with_mqa)?|"
    r"mlp\.(experts\.\d+\.|shared_experts\.)?(gate|up|down)_proj)\.weight"
)
_SMALL = dict(
    vocabulary_size=64,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    hidden_dim=40,
    intermediate_dim=24,
    tie_word_embeddings=False,
)
CASES = {
    # Any family reads FP8: Llama's table has no FP8 row either.
    "llama": lambda: Llama3Backbone(
        **{k: v for k, v in _SMALL.items() if k != "head_dim"}
    ),
    "qwen3": lambda: Qwen3Backbone(**_SMALL),
    # DeepSeek-V3's MLA and shared experts, as it is published in FP8 (its
    # latent norms, router and correction bias unquantized).
    "deepseek_v3": lambda: DeepSeekV3Backbone(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=4,
        hidden_dim=40,
        intermediate_dim=24,
        moe_intermediate_dim=24,
        n_routed_experts=4,
        n_shared_experts=1,
        num_experts_per_tok=2,
        n_group=2,
        topk_group=1,
        first_k_dense_replace=1,
        q_lora_rank=24,
        kv_lora_rank=16,
        qk_nope_head_dim=8,
        qk_rope_head_dim=4,
        v_head_dim=8,
    ),
    "qwen3_moe": lambda: Qwen3MoeBackbone(
        **_SMALL,
        moe_intermediate_dim=24,
        num_experts=4,
        top_k=2,
        sliding_window_size=None,
    ),
}


def quantize(weight, block=(BLOCK, BLOCK)):
    """`(codes, scale_inv, dequantized)` of a float32 `(out, in)` weight,
    as `transformers`' fp8 quantizer stores it: each block's scale is its
    largest magnitude over e4m3's largest value, 448."""
    rows, columns = weight.shape
    blocks = (-(-rows // block[0]), -(-columns // block[1]))
    padded = np.zeros((blocks[0] * block[0], blocks[1] * block[1]), "float32")
    padded[:rows, :columns] = weight
    largest = np.abs(
        padded.reshape(blocks[0], block[0], blocks[1], block[1])
    ).max(axis=(1, 3))
    scale = (np.maximum(largest, 1e-12) / 448).astype("float32")
    expanded = np.repeat(np.repeat(scale, block[0], 0), block[1], 1)
    expanded = expanded[:rows, :columns]
    codes = (weight / expanded).astype(ml_dtypes.float8_e4m3fn)
    return codes, scale, codes.astype("float32") * expanded


def _write(path, tensors, config):
    path.mkdir()
    save_file(tensors, str(path / WEIGHTS))
    (path / "config.json").write_text(json.dumps(config))


def _write_case(name, root):
    """`(FP8 checkpoint, dequantized twin, the FP8 tensors)` of case
    `name` under `root` (safetensors' NumPy reader has no float8 type:
    tests keep the tensors written)."""
    randomize(CASES[name]()).save_to_preset(
        str(root / "float"), format="huggingface"
    )
    config = json.loads((root / "float" / "config.json").read_text())
    quantized, twin = {}, {}
    for tensor, value in load_file(str(root / "float" / WEIGHTS)).items():
        if QUANTIZED.fullmatch(tensor):
            codes, scale, value = quantize(value)
            quantized[tensor] = codes
            quantized[tensor + "_scale_inv"] = scale
        else:
            quantized[tensor] = value
        twin[tensor] = value
    assert sum(t.endswith("_scale_inv") for t in quantized) >= 14
    _write(
        root / "fp8", quantized, {**config, "quantization_config": QUANTIZATION}
    )
    _write(root / "twin", twin, config)
    return root / "fp8", root / "twin", quantized


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """`checkpoints(name)`: case `name`'s checkpoints, written once."""
    made = {}

    def get(name):
        if name not in made:
            made[name] = _write_case(name, tmp_path_factory.mktemp(name))
        return made[name]

    return get


@pytest.fixture(scope="module", params=sorted(CASES))
def written(request, checkpoints):
    return checkpoints(request.param)


@pytest.fixture(scope="module")
def twin_loaded(written):
    return Backbone.from_preset(str(written[1]))


def test_fp8_loads_dequantized_exactly(written, twin_loaded):
    ours = Backbone.from_preset(str(written[0]))
    assert ours.dtype == "float32"
    assert_same_weights(ours, twin_loaded)


def test_kernel_is_the_dequantized_weight_transposed(checkpoints):
    fp8, _, tensors = checkpoints("qwen3")
    name = "model.layers.1.mlp.down_proj.weight"
    expected = dequantize_fp8(
        tensors[name], tensors[name + "_scale_inv"], (BLOCK, BLOCK)
    )
    with pytest.warns(LossyConversionWarning, match="rounded"):
        ours = Backbone.from_preset(str(fp8), dtype="bfloat16")
    (kernel,) = [
        keras.ops.convert_to_numpy(v)
        for v in ours.weights
        if v.path == "transformer_layer_1/feedforward_output_dense/kernel"
    ]
    # Computed in float32, rounded once to the variables' bfloat16.
    assert kernel.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(kernel, expected.T.astype(kernel.dtype))


@pytest.mark.multi_device
def test_fp8_loads_into_shards(written, twin_loaded):
    # (2, 4) cuts the 24-wide intermediate in 6 and the 40-wide hidden in
    # 20: mid-block, so each device reads a part of its blocks.
    cls = type(twin_loaded)
    distribution = keras.distribution.ModelParallel(
        layout_map=cls.get_layout_map(make_mesh((2, 4))),
        batch_dim_name="batch",
    )
    with distribution.scope():
        ours = Backbone.from_preset(str(written[0]))
    assert any(not v.value.sharding.is_fully_replicated for v in ours.weights)
    assert_follows_plan(ours)
    assert_same_weights(ours, twin_loaded)


# === Reading boxes ===


@pytest.mark.parametrize(
    "box",
    [
        ((0, 2), (0, 40), (0, 24)),
        ((1, 2), (17, 33), (5, 23)),
        ((0, 2), (31, 33), (15, 17)),
        ((1, 2), (32, 40), (16, 24)),
    ],
)
def test_fp8_reads_only_the_blocks_of_a_box(box):
    rng = np.random.default_rng(0)
    # (2, 40, 24) with (16, 8) blocks: scales (2, 3, 3), partial rows.
    block = (16, 8)
    values = rng.normal(size=(2, 40, 24)).astype("float32")
    parts = [quantize(v, block) for v in values]
    arrays = {
        "w": np.stack([p[0] for p in parts]),
        "w_scale_inv": np.stack([p[1] for p in parts]),
    }
    infos = {
        name: TensorInfo("f", name, array.shape, array.dtype.name)
        for name, array in arrays.items()
    }
    tensor, problems = Fp8(block).find("w", infos)
    assert problems == [] and tensor.shape == (2, 40, 24)
    reads = []

    def read(name, their_box):
        reads.append((name, their_box))
        return arrays[name][tuple(slice(a, b) for a, b in their_box)]

    got = tensor.read(read, box, "float32")
    expected = np.stack([p[2] for p in parts])
    np.testing.assert_array_equal(
        got, expected[tuple(slice(a, b) for a, b in box)]
    )
    lead, rows, columns = box
    assert reads == [
        (
            "w_scale_inv",
            (
                lead,
                (rows[0] // 16, -(-rows[1] // 16)),
                (columns[0] // 8, -(-columns[1] // 8)),
            ),
        ),
        ("w", box),
    ]


# === Malformed FP8 checkpoints ===


def _edited(written, target, tensors=None, config=None):
    """A copy of the FP8 checkpoint of `written` at `target`, its tensors
    and config edited in place by the callables given."""
    arrays = dict(written[2])
    data = json.loads((written[0] / "config.json").read_text())
    for edit, value in ((tensors, arrays), (config, data)):
        if edit is not None:
            edit(value)
    _write(target, arrays, data)
    return str(target)


DOWN = "model.layers.0.mlp.down_proj.weight"
SCALE = DOWN + "_scale_inv"


def _set_scale(value, index=(1, 0)):
    def edit(arrays):
        arrays[SCALE] = arrays[SCALE].copy()
        arrays[SCALE][index] = value

    return edit


MALFORMED = {
    "no_scale": (
        dict(tensors=lambda t: t.pop(SCALE)),
        r"down_proj.weight_scale_inv: missing \(the FP8 block scales of "
        r".*down_proj.weight \(40, 24\) float8_e4m3fn, expected shape "
        r"\(3, 2\) for weight_block_size \[16, 16\]\)",
    ),
    "scale_shape": (
        dict(tensors=lambda t: t.update({SCALE: t[SCALE][:2]})),
        r"down_proj.weight_scale_inv has shape \(2, 2\), expected \(3, 2\): "
        r"the FP8 block scales of .*down_proj.weight \(40, 24\), one per "
        r"block of weight_block_size \[16, 16\]",
    ),
    # Scales that would fit 32 x 32 blocks: every scale is mis-shaped.
    "block_size_disagrees": (
        dict(
            config=lambda d: d["quantization_config"].update(
                weight_block_size=[32, 32]
            )
        ),
        r"\(14 problem\(s\); nothing was loaded\):\n  - .*"
        r"q_proj.weight_scale_inv has shape \(2, 3\), expected \(1, 2\)",
    ),
    "scale_dtype": (
        dict(tensors=lambda t: t.update({SCALE: t[SCALE].astype("int32")})),
        r"weight_scale_inv has dtype int32; the FP8 block scales of "
        r".*down_proj.weight are floats \(float32 or bfloat16",
    ),
    "nan_scale": (
        dict(tensors=_set_scale(np.nan)),
        r"down_proj.weight_scale_inv: block \[1, 0\] of .*down_proj.weight "
        r"has scale nan; FP8 block scales must be finite and positive",
    ),
    "zero_scale": (
        dict(tensors=_set_scale(0.0, (2, 1))),
        r"block \[2, 1\] of .*down_proj.weight has scale 0.0",
    ),
    "negative_scale": (
        dict(tensors=_set_scale(-1.0)),
        r"block \[1, 0\] of .*down_proj.weight has scale -1.0",
    ),
    "no_quantization_config": (
        dict(config=lambda d: d.pop("quantization_config")),
        r"down_proj.weight is stored as float8_e4m3fn, but config.json has "
        r"no quantization_config with quant_method 'fp8'",
    ),
}


@pytest.mark.parametrize("edit, message", MALFORMED.values(), ids=MALFORMED)
def test_malformed_fp8_names_the_tensor_and_block(
    checkpoints, tmp_path, edit, message
):
    path = _edited(checkpoints("qwen3"), tmp_path / "hf", **edit)
    with pytest.raises(PresetError, match=message):
        Backbone.from_preset(path)
