"""Bad Hugging Face checkpoints fail with messages that name the problem;
dispatch, export options, the plan CLI and the conversion vocabulary."""

import hashlib
import json
import os
import shutil
import stat
import warnings

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from keras_nlp.cli import main
from keras_nlp.models import Backbone
from keras_nlp.models import Llama3Backbone
from keras_nlp.models import LlamaBackbone
from keras_nlp.models import MistralBackbone
from keras_nlp.saving import LossyConversionWarning
from keras_nlp.saving import PresetError
from keras_nlp.saving.huggingface import Merge
from keras_nlp.saving.huggingface import Permute
from keras_nlp.saving.huggingface import Split
from keras_nlp.saving.huggingface import Transpose
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import bind
from keras_nlp.saving.huggingface import family_for_backbone
from keras_nlp.saving.huggingface.checkpoint import TensorInfo
from keras_nlp.saving.huggingface.per_expert import PER_EXPERT_DOWN
from keras_nlp.saving.huggingface.per_expert import PER_EXPERT_GATE_UP
from tests.models.backbone_checks import make_mesh
from tests.models.tiny_configs import tiny
from tests.saving.huggingface_checkpoints import with_defaults

CONFIG = dict(
    vocabulary_size=32,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=16,
    intermediate_dim=24,
)
WEIGHTS = "model.safetensors"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama") / "hf"
    Llama3Backbone(**CONFIG).save_to_preset(str(path), format="huggingface")
    return path


@pytest.fixture
def checkpoint(saved, tmp_path):
    path = tmp_path / "hf"
    shutil.copytree(saved, path)
    return path


def _edit_config(path, **fields):
    config = json.loads((path / "config.json").read_text())
    config.update(fields)
    (path / "config.json").write_text(json.dumps(config))


def _edit_tensors(path, edit):
    tensors = load_file(str(path / WEIGHTS))
    edit(tensors)
    save_file(tensors, str(path / WEIGHTS))


def test_unknown_model_type_lists_the_supported_ones(checkpoint):
    _edit_config(checkpoint, model_type="llama9")
    with pytest.raises(PresetError, match="model_type 'llama9' has no") as e:
        Backbone.from_preset(str(checkpoint))
    # Every registered family is listed, in order.
    from keras_nlp.saving.huggingface.family import registered_families

    supported = sorted(registered_families())
    assert {"llama", "mistral", "qwen2", "qwen3"} <= set(supported)
    assert ", ".join(supported) in str(e.value)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"mlp_bias": True}, "mlp_bias=True changes the architecture"),
        ({"attention_bias": True}, "attention_bias=True changes"),
        ({"hidden_act": "gelu"}, "hidden_act='gelu' changes"),
        ({"head_dim": 8}, r"head_dim=8 changes .* Supported: 4"),
        (
            {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
            r"rope_scaling.rope_type='yarn' .* Supported: 'default', "
            r"'linear', 'llama3'",
        ),
        (
            {"rope_scaling": {"type": "linear", "factor": 2.0, "beta": 1}},
            r"keys \['beta'\] are not understood for 'linear' RoPE",
        ),
        # Quantized checkpoints: any family reads fp8 (block-scaled e4m3;
        # tests/saving/test_huggingface_fp8.py), nothing else.
        *(
            (
                {"quantization_config": {"quant_method": method, "bits": 4}},
                rf"quantization_config has quant_method={method!r}, which "
                r"keras_nlp does not read. It reads 'fp8' \(block-scaled "
                r"float8 e4m3 weights, any model type\) and 'mxfp4'",
            )
            for method in ("gptq", "awq", "bitsandbytes", "compressed-tensors")
        ),
        (
            {"quantization_config": {"bits": 4}},
            r"quant_method=None, which keras_nlp does not read",
        ),
        (
            {"quantization_config": {"quant_method": "fp8", "fmt": "e5m2"}},
            r"quantization_config.fmt='e5m2' is not read; fp8 checkpoints "
            r"load when their weights are 'e4m3'",
        ),
        *(
            (
                {
                    "quantization_config": {
                        "quant_method": "fp8",
                        "weight_block_size": size,
                    }
                },
                r"quantization_config.weight_block_size=.* must be two "
                r"positive integers \[rows, columns\]",
            )
            for size in ([128], [0, 128], [128, 12.5], None, "128")
        ),
        (
            {"quantization_config": {"quant_method": "fp8", "group_size": 1}},
            r"quantization_config keys \['group_size'\] are not understood "
            r"for quant_method 'fp8'",
        ),
        # Values that are not valid, refused before anything is built.
        ({"hidden_size": "32"}, r"hidden_size='32' is not a valid value; it"),
        ({"num_attention_heads": 0}, r"num_attention_heads=0 is not a valid"),
        ({"num_attention_heads": True}, r"num_attention_heads=True is not a"),
        (
            {"num_attention_heads": 6, "head_dim": None},
            r"num_attention_heads=6 is not a valid value; it must be a "
            r"divisor of hidden_size=16",
        ),
        (
            {"num_key_value_heads": 3},
            r"num_key_value_heads=3 .* divisor of num_attention_heads=4",
        ),
        ({"rms_norm_eps": float("nan")}, r"rms_norm_eps=nan is not a valid"),
        ({"rms_norm_eps": -1}, r"rms_norm_eps=-1 .* a finite number above 0"),
        ({"rope_theta": -5}, r"rope_theta=-5 is not a valid value"),
        (
            {"rope_scaling": {"type": "linear", "factor": float("nan")}},
            r"rope_scaling.factor=nan is not a valid value",
        ),
        (
            {"max_position_embeddings": 10**15},
            r"max_position_embeddings=1000000000000000 .* at most 16777216",
        ),
        (
            {"torch_dtype": "float128"},
            r"torch_dtype='float128' is not a valid value; it must be one of "
            r"'float32'",
        ),
        ({"tie_word_embeddings": 1}, r"tie_word_embeddings=1 .* true or false"),
        (
            {"num_hidden_layers": 10**6},
            r"num_hidden_layers=1000000 .* positive integer at most 256",
        ),
        # The checkpoint's headers show 2 layers: refused before building.
        (
            {"num_hidden_layers": 3},
            r"num_hidden_layers=3 .* at most the 2 layers the checkpoint's",
        ),
        # `(file, text)`: the whole config.json, as text.
        (
            (
                "config.json",
                '{"model_type": "llama", "x": '
                + "[" * 10**5
                + "]" * 10**5
                + "}",
            ),
            r"config\.json nests JSON arrays and objects 100001 levels deep; "
            r"at most 64",
        ),
    ],
)
def test_unsupported_architecture_fields_are_named(checkpoint, fields, message):
    if isinstance(fields, tuple):
        name, text = fields
        (checkpoint / name).write_text(text)
    else:
        _edit_config(checkpoint, **fields)
    with pytest.raises(PresetError, match=message):
        Backbone.from_preset(str(checkpoint))


def test_fp8_config_loads_any_family_and_its_float_tensors(checkpoint, saved):
    # Which tensors are float8 their dtypes say (none here); what only
    # changes transformers' matmuls (activations, scale format, the
    # modules left unquantized) is accepted as written.
    _edit_config(
        checkpoint,
        quantization_config={
            "quant_method": "fp8",
            "fmt": "e4m3",
            "activation_scheme": "static",
            "weight_block_size": [128, 128],
            "modules_to_not_convert": ["lm_head"],
            "scale_fmt": "ue8m0",
        },
    )
    loaded = Backbone.from_preset(str(checkpoint))
    reference = Backbone.from_preset(str(saved))
    for ours, theirs in zip(loaded.weights, reference.weights, strict=True):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_config_translation_covers_rope_scaling_kinds(checkpoint):
    _edit_config(
        checkpoint,
        rope_scaling={"type": "linear", "factor": 2.0},
        rope_theta=500000.0,
        rms_norm_eps=1e-5,
    )
    config = Backbone.from_preset(str(checkpoint), load_weights=False)
    assert config.rope_position_scaling_factor == 2.0
    assert config.rope_max_wavelength == 500000.0
    assert config.layer_norm_epsilon == 1e-5
    # transformers v5 spells RoPE as one `rope_parameters` object.
    config = json.loads((checkpoint / "config.json").read_text())
    del config["rope_scaling"], config["rope_theta"]
    config["rope_parameters"] = {
        "rope_type": "llama3",
        "rope_theta": 10000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    (checkpoint / "config.json").write_text(json.dumps(config))
    backbone = Backbone.from_preset(str(checkpoint), load_weights=False)
    assert backbone.rope_frequency_adjustment_factor == 8.0
    assert backbone.rope_pretraining_sequence_length == 8192


# === Configs as transformers 5 writes them ===


def _rope_parameters(data):
    """transformers 5's RoPE: `rope_theta`, `rope_scaling` and a rotary
    fraction (`partial_rotary_factor`, GPT-NeoX's `rotary_pct` and
    `rotary_emb_base`) in one `rope_parameters` object; Gemma 3's per
    layer type, without `rope_theta` and `rope_local_base_freq` beside."""
    if isinstance(data.get("rope_parameters"), dict):
        for name in ("rope_theta", "rope_local_base_freq", "rope_scaling"):
            data.pop(name, None)
        return
    scaling = data.pop("rope_scaling", None) or {}
    rope = {k: v for k, v in scaling.items() if k != "type"}
    rope.setdefault("rope_type", scaling.get("type", "default"))
    for old, new in (
        ("rope_theta", "rope_theta"),
        ("rotary_emb_base", "rope_theta"),
        ("partial_rotary_factor", "partial_rotary_factor"),
        ("rotary_pct", "partial_rotary_factor"),
    ):
        if old in data:
            rope[new] = data.pop(old)
    data["rope_parameters"] = rope


TRANSFORMERS_5_EDITS = {
    # The masked-LM head's (BART: the encoder's and decoder's embedding)
    # tie, now written by every config class that has one.
    "tie_word_embeddings": lambda d: d.update(tie_word_embeddings=True),
    "num_local_experts": lambda d: d.update(
        num_local_experts=d.pop("num_experts")
    ),
    "rope_parameters": _rope_parameters,
    # Qwen 2 MoE writes 0 for no window.
    "sliding_window": lambda d: d.update(sliding_window=0),
    "dtype": lambda d: d.update(dtype=d.pop("torch_dtype", "bfloat16")),
}

# `(backbone[:tiny config], field spelled as transformers 5 does)`: the
# config our export writes (transformers 4's spelling) with that field
# respelled translates to the same arguments, so the same model reads the
# same tensors.
TRANSFORMERS_5 = [
    *(
        (name, "tie_word_embeddings")
        for name in (
            "BertBackbone",
            "RobertaBackbone",
            "XLMRobertaBackbone",
            "DistilBertBackbone",
            "AlbertBackbone",
            "BartBackbone",
        )
    ),
    ("Qwen3MoeBackbone", "num_local_experts"),
    *(
        (name, "dtype")
        for name in (
            "GPT2Backbone",
            "OPTBackbone",
            "FalconBackbone",
            "Gemma3Backbone:mqa_4_1",
            "PaliGemmaBackbone",
        )
    ),
    ("QwenMoeBackbone", "sliding_window"),
    *(
        (name, "rope_parameters")
        for name in (
            "Phi3Backbone",
            "Llama3Backbone",
            "MistralBackbone",
            "MixtralBackbone",
            "QwenBackbone",
            "Qwen3Backbone",
            "QwenMoeBackbone",
            "Qwen3MoeBackbone",
            "GemmaBackbone",
            "GemmaBackbone:gqa_8_4_gemma2",
            "GPTNeoXBackbone",
            "GptOssBackbone",
        )
    ),
]


@pytest.mark.parametrize(
    "name, field", TRANSFORMERS_5, ids=["-".join(r) for r in TRANSFORMERS_5]
)
def test_transformers_5_spellings_translate_alike(name, field):
    name, _, config_name = name.partition(":")
    cls, config = tiny(name, config_name or "tiny")
    family = family_for_backbone(cls)
    written = family.export_config(with_defaults(cls, config))
    respelled = json.loads(json.dumps(written))
    TRANSFORMERS_5_EDITS[field](respelled.get("text_config", respelled))
    assert respelled != written
    expected = family.translate(written, "config.json", cls)
    assert family.translate(respelled, "config.json", cls) == expected


def test_transformers_5_config_loads_the_same_weights(checkpoint, saved):
    config = json.loads((checkpoint / "config.json").read_text())
    for field in ("rope_parameters", "dtype"):
        TRANSFORMERS_5_EDITS[field](config)
    (checkpoint / "config.json").write_text(json.dumps(config))
    loaded = Backbone.from_preset(str(checkpoint))
    reference = Backbone.from_preset(str(saved))
    for ours, theirs in zip(loaded.weights, reference.weights, strict=True):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_missing_weights_file_is_named(checkpoint):
    os.remove(checkpoint / WEIGHTS)
    with pytest.raises(PresetError, match="has no weights: neither"):
        Backbone.from_preset(str(checkpoint))


def test_missing_shard_listed_in_the_index_is_named(tmp_path):
    path = tmp_path / "hf"
    Llama3Backbone(**CONFIG).save_to_preset(
        str(path), format="huggingface", max_shard_size=0.00001
    )
    index = json.loads((path / "model.safetensors.index.json").read_text())
    second = sorted(set(index["weight_map"].values()))[1]
    os.remove(path / second)
    with pytest.raises(PresetError) as error:
        Backbone.from_preset(str(path))
    assert f"{second} does not exist (listed in " in str(error.value)


def test_truncated_file_is_named(checkpoint):
    data = (checkpoint / WEIGHTS).read_bytes()
    (checkpoint / WEIGHTS).write_bytes(data[:-100])
    with pytest.raises(PresetError, match="truncated or corrupt") as error:
        Backbone.from_preset(str(checkpoint))
    assert str(checkpoint / WEIGHTS) in str(error.value)


def test_index_naming_a_file_outside_is_refused(checkpoint, tmp_path):
    names = list(load_file(str(checkpoint / WEIGHTS)))
    shutil.copy(checkpoint / WEIGHTS, tmp_path / "elsewhere.safetensors")
    os.remove(checkpoint / WEIGHTS)
    index = {"weight_map": {n: "../elsewhere.safetensors" for n in names}}
    (checkpoint / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(PresetError, match="lists '../elsewhere.safetensors'"):
        Backbone.from_preset(str(checkpoint))


def test_linked_weights_file_is_refused(checkpoint, tmp_path):
    shutil.move(checkpoint / WEIGHTS, tmp_path / "real.safetensors")
    os.symlink(tmp_path / "real.safetensors", checkpoint / WEIGHTS)
    with pytest.raises(PresetError, match="is a symbolic link"):
        Backbone.from_preset(str(checkpoint))


def _hub_cache(saved, root, name="models--tiny--llama"):
    """`saved` laid out as the Hugging Face cache keeps a download: each
    file in blobs/ under its hash, linked from snapshots/REV/ by a relative
    link, as huggingface_hub writes them. Returns the snapshot folder."""
    model = root / name
    (model / "blobs").mkdir(parents=True)
    snapshot = model / "snapshots" / "0123456789abcdef"
    snapshot.mkdir(parents=True)
    for file in sorted(saved.iterdir()):
        data = file.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        (model / "blobs" / digest).write_bytes(data)
        os.symlink(f"../../blobs/{digest}", snapshot / file.name)
    return snapshot


@pytest.mark.multi_device
def test_hugging_face_cache_snapshot_loads(saved, tmp_path):
    snapshot = _hub_cache(saved, tmp_path)
    expected = {
        v.path: v.numpy() for v in Backbone.from_preset(str(saved)).weights
    }
    loaded = Backbone.from_preset(str(snapshot))
    assert {v.path: v.numpy() for v in loaded.weights}.keys() == expected.keys()
    for variable in loaded.weights:
        np.testing.assert_array_equal(variable.numpy(), expected[variable.path])
    distribution = keras.distribution.ModelParallel(
        layout_map=Llama3Backbone.get_layout_map(make_mesh((2, 4))),
        batch_dim_name="batch",
    )
    with distribution.scope():
        sharded = Backbone.from_preset(str(snapshot))
    assert any(
        not v.value.sharding.is_fully_replicated for v in sharded.weights
    )
    for variable in sharded.weights:
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(variable.value),
            expected[variable.path],
            err_msg=variable.path,
        )


# Links of a cache snapshot that are refused: (what is changed, the
# refusal). Every outside target is a FIFO, or a link to one: opening it
# would fail otherwise ("not a regular file"), so each refusal shows that
# nothing behind the link was opened.
CACHE_LINKS_REFUSED = [
    (
        "link into another model's blobs",
        "../../../models--other--model/blobs/{blob}",
        "leads outside the snapshot and not into this model's blobs/ folder",
    ),
    ("blob that is a link", "blob", "leads to a blob that is itself a link"),
    ("blobs/ that is a link", "blobs", "leads into a blobs/ that is not a"),
    ("absolute link", "{blobs}/{blob}", "is absolute"),
    (
        "link through a linked folder",
        "hop/{blob}",
        "leads to another symbolic link",
    ),
]


@pytest.mark.parametrize(
    "change, target, refusal",
    CACHE_LINKS_REFUSED,
    ids=[row[0] for row in CACHE_LINKS_REFUSED],
)
def test_hugging_face_cache_links_that_leave_are_refused(
    saved, tmp_path, change, target, refusal
):
    snapshot = _hub_cache(saved, tmp_path)
    model = snapshot.parent.parent
    link = snapshot / WEIGHTS
    blob = os.readlink(link).rsplit("/", 1)[1]
    other = tmp_path / "models--other--model" / "blobs"
    other.mkdir(parents=True)
    os.mkfifo(other / blob)
    if target == "blob":
        os.remove(model / "blobs" / blob)
        os.symlink(other / blob, model / "blobs" / blob)
        target = os.readlink(link)
    elif target == "blobs":
        shutil.rmtree(model / "blobs")
        os.symlink(other, model / "blobs")
        # config.json, read first, is refused first.
        link = snapshot / "config.json"
        target = os.readlink(link)
    else:
        os.symlink(other, snapshot / "hop")
        target = target.format(blob=blob, blobs=model / "blobs")
        os.remove(link)
        os.symlink(target, link)
    with pytest.raises(PresetError) as info:
        Backbone.from_preset(str(snapshot))
    assert str(info.value).startswith(
        f"{link} is a symbolic link (to {target!r}), which {refusal}"
    )
    assert stat.S_ISFIFO(os.lstat(other / blob).st_mode)


def test_wrong_shape_and_dtype_are_listed(checkpoint):
    def edit(tensors):
        name = "model.layers.0.mlp.up_proj.weight"
        tensors[name] = np.zeros((24, 15), "float32")
        tensors["model.norm.weight"] = np.ones(16, "int32")

    _edit_tensors(checkpoint, edit)
    with pytest.raises(PresetError, match=r"2 problem\(s\)") as error:
        Backbone.from_preset(str(checkpoint))
    message = str(error.value)
    assert (
        "model.layers.0.mlp.up_proj.weight has shape (24, 15), expected "
        "(24, 16)" in message
    )
    assert "model.norm.weight has dtype int32, expected float32" in message


def test_narrower_dtype_loads_with_a_lossy_warning(checkpoint):
    with pytest.warns(LossyConversionWarning, match="rounded") as record:
        backbone = Backbone.from_preset(str(checkpoint), dtype="bfloat16")
    assert backbone.weights[0].dtype == "bfloat16"
    message = str(record[0].message)
    assert "21 weight(s)" in message, message
    assert "token_embedding/embeddings (float32 in the file)" in message
    # A wider dtype loads silently and exactly.
    _edit_tensors(
        checkpoint,
        lambda t: t.update({k: v.astype("float16") for k, v in t.items()}),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", LossyConversionWarning)
        Backbone.from_preset(str(checkpoint))


def test_every_missing_tensor_is_listed(checkpoint):
    removed = [
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.1.mlp.down_proj.weight",
        "lm_head.weight",
    ]
    _edit_tensors(checkpoint, lambda t: [t.pop(n) for n in removed])
    with pytest.raises(PresetError, match=r"3 problem\(s\)") as error:
        Backbone.from_preset(str(checkpoint))
    for name in removed:
        assert f"{name}: missing" in str(error.value)


def test_extra_tensors_are_listed_unless_ignorable(checkpoint):
    extra = {
        "model.layers.0.self_attn.rotary_emb.inv_freq": np.ones(2, "float32"),
        "model.layers.0.self_attn.q_norm.weight": np.ones(4, "float32"),
        "model.vision.weight": np.ones(3, "float32"),
    }
    _edit_tensors(checkpoint, lambda t: t.update(extra))
    with pytest.raises(PresetError, match=r"2 problem\(s\)") as error:
        Backbone.from_preset(str(checkpoint))
    message = str(error.value)
    assert (
        "model.layers.0.self_attn.q_norm.weight (shape (4,)): unexpected"
        in (message)
    )
    assert "model.vision.weight (shape (3,)): unexpected" in message
    assert "inv_freq" not in message
    # The rotary cache alone is ignorable.
    _edit_tensors(
        checkpoint,
        lambda t: [t.pop(n) for n in list(extra)[1:]],
    )
    Backbone.from_preset(str(checkpoint))


def test_base_model_checkpoint_without_prefix_loads(checkpoint, saved):
    def strip(tensors):
        for name in list(tensors):
            if name.startswith("model."):
                tensors[name[len("model.") :]] = tensors.pop(name)

    _edit_tensors(checkpoint, strip)
    loaded = Backbone.from_preset(str(checkpoint))
    reference = Backbone.from_preset(str(saved))
    for ours, theirs in zip(loaded.weights, reference.weights, strict=True):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_class_dispatch(checkpoint):
    # keras-hub maps `llama` to Llama 3; the Llama class builds itself.
    assert type(Backbone.from_preset(str(checkpoint))) is Llama3Backbone
    assert type(LlamaBackbone.from_preset(str(checkpoint))) is LlamaBackbone
    with pytest.raises(ValueError, match="is a 'llama' model, which loads as"):
        MistralBackbone.from_preset(str(checkpoint))


def test_sharded_export_writes_an_index(tmp_path):
    backbone = Llama3Backbone(**CONFIG)
    path = tmp_path / "hf"
    backbone.save_to_preset(
        str(path), format="huggingface", max_shard_size=1e-5
    )
    index = json.loads((path / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    assert files == sorted(
        f for f in os.listdir(path) if f.endswith(".safetensors")
    )
    # At most 1e-5 GB per file, unless one tensor is larger.
    largest = max(v.numpy().nbytes for v in backbone.weights)
    limit = max(1e-5 * 1024**3, largest)
    assert len(files) > 1
    for name in files:
        assert os.path.getsize(path / name) <= limit + 4096, name
    assert len(index["weight_map"]) == len(backbone.weights)
    sizes = sum(v.numpy().nbytes for v in backbone.weights)
    assert index["metadata"]["total_size"] == sizes
    # Saving in our format replaces the Hugging Face files.
    backbone.save_to_preset(str(path))
    assert not any(f.endswith(".safetensors") for f in os.listdir(path))
    assert type(Backbone.from_preset(str(path))) is Llama3Backbone


def test_bad_export_arguments(tmp_path):
    backbone = Llama3Backbone(**CONFIG)
    with pytest.raises(ValueError, match="format='safetensors'"):
        backbone.save_to_preset(str(tmp_path / "a"), format="safetensors")
    # F-Net has no Hugging Face checkpoints in keras-hub or here.
    f_net_cls, config = tiny("FNetBackbone")
    with pytest.raises(ValueError, match="FNetBackbone has no Hugging Face"):
        f_net_cls(**config).save_to_preset(
            str(tmp_path / "g"), format="huggingface"
        )
    assert not (tmp_path / "g").exists()


def test_plan_cli_reads_only_the_config(checkpoint, capsys):
    os.remove(checkpoint / WEIGHTS)
    assert main(["plan", str(checkpoint), "--mesh", "1x8", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    paths = {w["path"] for w in plan["weights"]}
    assert "transformer_layer_1/self_attention/query/kernel" in paths


# === The conversion vocabulary: any box of ours reads back exactly ===


def _random_boxes(shape, rng, count=12):
    for _ in range(count):
        box = []
        for size in shape:
            start = int(rng.integers(0, size))
            box.append((start, int(rng.integers(start + 1, size + 1))))
        yield tuple(box)


@pytest.mark.parametrize(
    "ops, shape",
    [
        ((Merge(1), Transpose()), (6, 4, 3)),
        ((Merge(0), Transpose()), (4, 3, 5)),
        ((Merge(0, 3),), (2, 3, 4)),
        ((Split(1, (2, -1)), Transpose((2, 0, 1))), (5, 6)),
        ((Permute(0, lambda n: np.arange(n)[::-1]), Transpose()), (7, 3)),
    ],
)
def test_ops_read_any_box_exactly(ops, shape):
    rng = np.random.default_rng(0)
    ours = rng.normal(size=shape).astype("float32")
    (binding,), _ = bind([Weight("w", "t", ops)], [("w", shape)])
    ((_, theirs),) = binding.to_theirs(ours)
    assert theirs.shape == binding.converted_shape()
    for box in _random_boxes(shape, rng):
        _, their_box, cut = binding.plan(box)
        piece = theirs[tuple(slice(a, b) for a, b in their_box)]
        expected = ours[tuple(slice(a, b) for a, b in box)]
        np.testing.assert_array_equal(cut(piece), expected)


def test_fused_parts_and_stacks_read_any_box_exactly():
    rng = np.random.default_rng(1)
    table = [
        Weight("l{i}/q", "l.{i}.qkv", (Merge(1), Transpose()), part=(0, 0)),
        Weight("l{i}/kv", "l.{i}.qkv", (Merge(1), Transpose()), part=(0, 6)),
        Weight("l{i}/experts", "l.{i}.e.{j}.w", (Transpose(),), stack_axis=0),
    ]
    shapes = {"l0/q": (4, 3, 2), "l0/kv": (4, 2, 2), "l0/experts": (3, 4, 5)}
    values = {
        p: rng.normal(size=s).astype("float32") for p, s in shapes.items()
    }
    bindings, unmatched = bind(table, list(shapes.items()))
    assert unmatched == []
    fused = np.zeros((10, 4), "float32")
    stacked = {}
    for binding in bindings:
        for name, value in binding.to_theirs(values[binding.path]):
            if binding.region() is None:
                stacked[name] = value
            else:
                _, start, stop = binding.region()
                fused[start:stop] = value
    assert sorted(stacked) == ["l.0.e.0.w", "l.0.e.1.w", "l.0.e.2.w"]
    for binding in bindings:
        for box in _random_boxes(binding.shape, rng):
            indices, their_box, cut = binding.plan(box)
            where = tuple(slice(a, b) for a, b in their_box)
            if binding.stacked:
                pieces = [
                    cut(stacked[binding.names[j]][where]) for j in indices
                ]
                got = np.stack(pieces, axis=0)
            else:
                got = cut(fused[where])
            expected = values[binding.path][tuple(slice(a, b) for a, b in box)]
            np.testing.assert_array_equal(got, expected)


def test_experts_stored_one_per_tensor_read_any_box_and_name_problems():
    rng = np.random.default_rng(2)
    fused = rng.normal(size=(3, 8, 5)).astype("float32")  # gate rows first
    stored = {}
    for expert in range(3):
        stored[f"m.experts.{expert}.gate_proj.weight"] = fused[expert, :4]
        stored[f"m.experts.{expert}.up_proj.weight"] = fused[expert, 4:]
    infos = {
        name: TensorInfo("model.safetensors", name, value.shape, "float32")
        for name, value in stored.items()
    }

    def read(name, box):
        return stored[name][tuple(slice(a, b) for a, b in box)]

    tensor, problems = PER_EXPERT_GATE_UP.find("m.experts.gate_up_proj", infos)
    assert problems == [] and tensor.shape == (3, 8, 5)
    for box in _random_boxes(fused.shape, rng):
        np.testing.assert_array_equal(
            tensor.read(read, box),
            fused[tuple(slice(a, b) for a, b in box)],
        )
    # Not stored so (no expert 0): the loader reports the fused tensor.
    assert PER_EXPERT_DOWN.find("m.experts.down_proj", infos) == (None, [])
    del infos["m.experts.1.up_proj.weight"]
    infos["m.experts.2.gate_proj.weight"] = TensorInfo(
        "model.safetensors", "m.experts.2.gate_proj.weight", (4, 6), "float32"
    )
    _, problems = PER_EXPERT_GATE_UP.find("m.experts.gate_up_proj", infos)
    assert problems == [
        "m.experts.1.up_proj.weight: missing (expert 1 of "
        "m.experts.gate_up_proj, stored one tensor per expert)",
        "model.safetensors:m.experts.2.gate_proj.weight has shape (4, 6); "
        "the experts of m.experts.gate_up_proj are (rows, 5) like "
        "model.safetensors:m.experts.0.gate_proj.weight",
    ]
