"""`config.json` files as `transformers` writes them, read and written back.

`tests/saving/transformers_configs/` holds what `transformers` 5.23 writes
(`make_configs.py` there writes it), read here without `transformers`:

- for every Hugging Face model type we load, the config it saves for its
  defaults (and variants): each is translated into our backbone's
  arguments (every field understood, or the file refused with a message
  naming the field), exported back, and the export must translate to the
  same arguments and agree with `transformers` on every field both write,
  but for the choices listed in `EXPORTED_OTHERWISE`;
- every built-in preset's export as `transformers` loads and saves it again
  (its strict configs check each field's type): it reads back as the
  preset.
"""

import json
import pathlib

import pytest

import keras_nlp.models  # noqa: F401 (registers the families)
from keras_nlp.saving import PresetError
from keras_nlp.saving.backbone_presets import registered_backbones
from keras_nlp.saving.huggingface import family_for_backbone
from keras_nlp.saving.huggingface.family import _FAMILIES
from tests.saving.huggingface_checkpoints import with_defaults

CONFIGS = pathlib.Path(__file__).parent / "transformers_configs"
RESAVED = CONFIGS / "resaved_presets.json"
FILES = sorted(p for p in CONFIGS.glob("*.json") if p != RESAVED)
COMMAND = "python tests/saving/transformers_configs/make_configs.py"

# transformers' defaults that no published checkpoint has, refused with the
# field named (published Gemma 3 has no vision head, PaliGemma's image
# token follows its text vocabulary, RoBERTa's epsilon is 1e-5).
REFUSED = {
    "gemma3": "vision_use_head=True",
    "paligemma": "image_token_index=256000",
    "roberta": "layer_norm_eps=1e-12",
    "xlm-roberta": "layer_norm_eps=1e-12",
}
# Fields our export writes otherwise, on purpose: `model_type` of a text
# model (its text type, or the composite's for Qwen 3.5 whose loaders
# expect it); values transformers leaves unset that ours states; the
# position limit of our config; Falcon's one key/value head of multi-query
# attention (transformers keeps `num_kv_heads` but reads
# `multi_query`); no multi-token prediction (DeepSeek-V3); T5Gemma 2's full
# layers' RoPE written `linear` with its factor, which keras-hub reads.
EXPORTED_OTHERWISE = {
    "deepseek_v3": {"num_nextn_predict_layers"},
    "falcon": {"num_kv_heads"},
    "gemma4": {"model_type"},
    "gpt2": {"n_inner"},
    "llama": {"max_position_embeddings"},
    "llama4": {"model_type"},
    "mistral": {"max_position_embeddings"},
    "mixtral": {"head_dim", "max_position_embeddings"},
    "qwen2": {"sliding_window", "max_window_layers"},
    "qwen2_moe": {
        "sliding_window",
        "max_window_layers",
        "max_position_embeddings",
    },
    "qwen3": {
        "sliding_window",
        "max_window_layers",
        "max_position_embeddings",
    },
    "qwen3_5_moe_text": {"model_type"},
    "qwen3_5_text": {"model_type"},
    "qwen3_moe": {"sliding_window", "max_position_embeddings"},
    "t5gemma2": {"rope_type"},
}
# Arguments read from files whose fields the new families spell their own
# way (transformers 5 folds Gemma 4's global layers into
# `per_layer_config`; DeepSeek-V3 writes its derived head sizes).
READ_AS = {
    "gemma4_text": dict(global_head_dim=512, num_global_key_value_heads=None),
    "gemma4_text__moe": dict(
        global_head_dim=512,
        num_global_key_value_heads=1,
        enable_moe_block=True,
        num_experts=8,
        num_experts_per_token=2,
        expert_intermediate_dim=64,
    ),
    "deepseek_v3": dict(qk_nope_head_dim=128, qk_rope_head_dim=64),
    "qwen3_5_moe": dict(num_experts=256, top_k=8, partial_rotary_factor=0.25),
}


def test_every_family_has_a_transformers_config():
    stored = {json.loads(f.read_text())["model_type"] for f in FILES}
    missing = sorted(set(_FAMILIES) - stored)
    assert missing == [], f"Write their configs with `{COMMAND}`."


def _translate(data, where):
    family = _FAMILIES[data["model_type"]]
    cls = registered_backbones()[family.backbone]
    return family, cls, family.translate(data, where, cls)


def _different_fields(theirs, ours, where=""):
    """Dotted names of the fields both write with other values."""
    found = set()
    for key, value in ours.items():
        if key not in theirs:
            continue
        if isinstance(value, dict) and isinstance(theirs[key], dict):
            found |= _different_fields(theirs[key], value, f"{where}{key}.")
        elif theirs[key] != value:
            found.add(where + key)
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.stem)
def test_transformers_config_reads_and_writes_back(path):
    name, data = path.stem, json.loads(path.read_text())
    if name in REFUSED:
        with pytest.raises(PresetError, match=REFUSED[name]):
            _translate(data, str(path))
        return
    family, cls, arguments = _translate(data, str(path))
    for key, value in READ_AS.get(name, {}).items():
        assert arguments[key] == value, key
    assert family_for_backbone(cls) is family
    exported = family.export_config(with_defaults(cls, arguments))
    exported = json.loads(json.dumps(exported))
    assert _translate(exported, "exported")[2] == arguments
    differ = {f.split(".")[-1] for f in _different_fields(data, exported)}
    assert differ == EXPORTED_OTHERWISE.get(name, set())


def preset_exports():
    """`{preset: (class name, config.json our export writes)}` for every
    built-in preset of a class with a Hugging Face family."""
    exports = {}
    for name, cls in sorted(registered_backbones().items()):
        if "presets" not in vars(cls):
            # Another test's subclass, with its parent's presets.
            continue
        try:
            family = family_for_backbone(cls)
        except ValueError:
            continue
        for preset, config in cls.presets.items():
            exported = family.export_config(with_defaults(cls, config))
            exports[preset] = (name, json.loads(json.dumps(exported)))
    return exports


def test_every_preset_export_reads_back_after_transformers_saves_it():
    resaved = json.loads(RESAVED.read_text())
    exports = preset_exports()
    assert sorted(resaved) == sorted(exports), (
        f"Write the data again (`{COMMAND}` export, then resave)."
    )
    for preset, (name, exported) in exports.items():
        ours = _translate(exported, preset)[2]
        family, _, again = _translate(resaved[preset], preset)
        assert name in family.class_names, preset
        assert json.loads(json.dumps(again)) == json.loads(json.dumps(ours)), (
            preset
        )
