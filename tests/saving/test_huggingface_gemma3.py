"""Hugging Face `gemma3_text` and `gemma3` checkpoints against keras-hub.

The text model is written by keras-hub's exporter (current names,
`rope_parameters`). The multimodal one is written by `tensor_writer` in the
layout of the first published Gemma 3 checkpoints (`language_model.model.*`,
`vision_tower.vision_model.*`, `multi_modal_projector.*`, nested configs
holding only non-default fields), which keras-hub's `convert_gemma3` reads;
keras-hub's own exporter writes vision names its converter cannot read
(`model.vision_tower.embeddings.*`, without `vision_model`). Our export
(current names) is read back by keras-hub in the round trip.
"""

import json
import re

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from keras_nlp.models import Backbone
from keras_nlp.models.gemma3.gemma3_huggingface import GEMMA3
from keras_nlp.saving import PresetError
from keras_nlp.saving.huggingface import huggingface_config
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import assert_real_outputs_close
from tests.saving.huggingface_checkpoints import exported_config
from tests.saving.huggingface_checkpoints import real_outputs
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.test_huggingface_gemma import gemma_tensors

_TEXT = dict(
    vocabulary_size=96,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=48,
    head_dim=16,
    use_post_ffw_norm=True,
    use_post_attention_norm=True,
    use_sliding_window_attention=True,
    sliding_window_size=4,
)
# 16x16 images, 2x2 patches pooled 4x4 (keras-hub's converter fixes the
# pool at 4): 4 soft tokens per image.
_VISION = dict(
    image_size=16,
    patch_size=2,
    num_heads=2,
    hidden_dim=16,
    num_layers=1,
    intermediate_dim=24,
    output_dim=32,
    pool_size=4,
)
_TOKENS_PER_IMAGE = 4


def _vision_inputs(vocabulary_size, length=10):
    rng = np.random.default_rng(0)
    token_ids = rng.integers(1, vocabulary_size, (2, length)).astype("int32")
    padding_mask = np.ones((2, length), "int32")
    padding_mask[1, length - 2 :] = 0
    vision_mask = np.zeros((2, length), "int32")
    vision_indices = np.zeros((2, _TOKENS_PER_IMAGE), "int32")
    for row, start in enumerate((1, 4)):
        positions = np.arange(start, start + _TOKENS_PER_IMAGE)
        vision_indices[row] = positions
        vision_mask[row, positions] = 1
    return {
        "token_ids": token_ids,
        "padding_mask": padding_mask,
        "images": rng.uniform(-1, 1, (2, 1, 16, 16, 3)).astype("float32"),
        "vision_indices": vision_indices,
        "vision_mask": vision_mask,
    }


def _published_config(oracle):
    """Like google/gemma-3-4b's: nested, non-default fields only."""
    encoder = oracle.vision_encoder
    return {
        "model_type": "gemma3",
        "architectures": ["Gemma3ForConditionalGeneration"],
        "boi_token_index": 255999,
        "eoi_token_index": 256000,
        "image_token_index": 262144,
        "initializer_range": 0.02,
        "mm_tokens_per_image": _TOKENS_PER_IMAGE,
        "text_config": {
            "model_type": "gemma3_text",
            "vocab_size": oracle.vocabulary_size,
            "hidden_size": oracle.hidden_dim,
            "intermediate_size": oracle.intermediate_dim,
            "num_hidden_layers": oracle.num_layers,
            "num_attention_heads": oracle.num_query_heads,
            "num_key_value_heads": oracle.num_key_value_heads,
            "head_dim": oracle.head_dim,
            "query_pre_attn_scalar": oracle.head_dim,
            "rope_scaling": {
                "factor": oracle.global_rope_scaling_factor,
                "rope_type": "linear",
            },
            "sliding_window": oracle.sliding_window_size,
        },
        "vision_config": {
            "model_type": "siglip_vision_model",
            "hidden_size": encoder.hidden_dim,
            "image_size": encoder.image_size,
            "intermediate_size": encoder.intermediate_dim,
            "num_attention_heads": encoder.num_heads,
            "num_hidden_layers": encoder.num_layers,
            "patch_size": encoder.patch_size,
            "vision_use_head": False,
        },
        "torch_dtype": "float32",
        "transformers_version": "4.50.0.dev0",
    }


def siglip_tower_tensors(encoder, tower):
    """keras-hub's SigLIP `image_encoder` under Hugging Face's names, each
    prefixed by `tower` (e.g. `vision_tower.vision_model.`)."""

    def array(variable):
        return np.asarray(variable.numpy())

    embeddings = encoder.vision_embeddings
    tensors = {
        tower + "embeddings.patch_embedding.weight": array(
            embeddings.patch_embedding.kernel
        ).transpose(3, 2, 0, 1),
        tower + "embeddings.patch_embedding.bias": array(
            embeddings.patch_embedding.bias
        ),
        tower + "embeddings.position_embedding.weight": array(
            embeddings.position_embedding.embeddings
        ),
        tower + "post_layernorm.weight": array(
            encoder.encoder_layer_norm.gamma
        ),
        tower + "post_layernorm.bias": array(encoder.encoder_layer_norm.beta),
    }
    for j, block in enumerate(encoder.resblocks):
        layer = f"{tower}encoder.layers.{j}."
        for name, dense in (
            ("self_attn.q_proj", block.attn.query_proj),
            ("self_attn.k_proj", block.attn.key_proj),
            ("self_attn.v_proj", block.attn.value_proj),
            ("self_attn.out_proj", block.attn.out_proj),
            ("mlp.fc1", block.mlp_dense_1),
            ("mlp.fc2", block.mlp_dense_2),
        ):
            tensors[layer + name + ".weight"] = array(dense.kernel).T
            tensors[layer + name + ".bias"] = array(dense.bias)
        for index, norm in ((1, block.layer_norm_1), (2, block.layer_norm_2)):
            tensors[layer + f"layer_norm{index}.weight"] = array(norm.gamma)
            tensors[layer + f"layer_norm{index}.bias"] = array(norm.beta)
    return tensors


def _published_tensors(oracle):
    tensors = gemma_tensors(
        oracle, "language_model.model.", gemma2_norms=True, qk_norm=True
    )
    encoder = oracle.vision_encoder.get_layer("image_encoder")
    output = oracle.vision_encoder.get_layer("vision_output_encoder")
    tensors.update(siglip_tower_tensors(encoder, "vision_tower.vision_model."))
    tensors["multi_modal_projector.mm_soft_emb_norm.weight"] = np.asarray(
        output.vision_soft_embedding_norm.scale.numpy()
    )
    tensors["multi_modal_projector.mm_input_projection_weight"] = np.asarray(
        output.vision_input_projection.kernel.numpy()
    )
    return tensors


def _hub_vision_encoder():
    from keras_hub.models import Gemma3VisionEncoder

    return Gemma3VisionEncoder(**_VISION)


class _LazyConfig(dict):
    """The vision case's keras-hub arguments, its encoder built on use."""

    def keys(self):
        return [*super().keys(), "vision_encoder"]

    def __iter__(self):
        return iter(self.keys())

    def __getitem__(self, key):
        if key == "vision_encoder":
            return _hub_vision_encoder()
        return super().__getitem__(key)


class TestGemma3TextCheckpoints(HuggingFaceFamilyTests):
    # Six layers: five local (window 4), one global with linear RoPE
    # scaling; keras-hub's exporter.
    cases = [
        HFCase(
            "gemma3_text",
            "Gemma3Backbone",
            dict(
                _TEXT,
                image_size=None,
                num_layers=6,
                global_rope_scaling_factor=8.0,
            ),
        )
    ]
    # The vision case below shards the same decoder on the other mesh.
    meshes = ((1, 8),)

    def test_any_layer_types(self, case, checkpoint, tmp_path):
        # A global layer, then a local one (no 5:1 prefix): keras-hub's
        # global block 5 and local block 0, renumbered 0 and 1. Its two
        # blocks, run in that order, are the oracle.
        path, theirs, inputs, _ = checkpoint
        layers = re.compile(r"model\.layers\.(\d+)\.(.*)")
        renumbered = {"5": "0", "0": "1"}
        tensors = {}
        for name, value in load_file(str(path / "model.safetensors")).items():
            match = layers.fullmatch(name)
            if match is None:
                tensors[name] = value
            elif match.group(1) in renumbered:
                index = renumbered[match.group(1)]
                tensors[f"model.layers.{index}.{match.group(2)}"] = value
        written = tmp_path / "written"
        written.mkdir()
        save_file(tensors, str(written / "model.safetensors"))
        layer_types = ["full_attention", "sliding_attention"]
        config = json.loads((path / "config.json").read_text())
        config.pop("sliding_window_pattern", None)
        config.update(num_hidden_layers=2, layer_types=layer_types)
        (written / "config.json").write_text(json.dumps(config))
        ours = Backbone.from_preset(str(written))
        assert ours.get_config()["layer_types"] == layer_types
        x = theirs.token_embedding(inputs["token_ids"])
        scale = keras.ops.sqrt(case.config["hidden_dim"])
        x = x * keras.ops.cast(scale, x.dtype)
        for index in (5, 0):
            x = theirs.transformer_layers[index](
                x, padding_mask=inputs["padding_mask"]
            )
        expected = real_outputs(inputs, theirs.layer_norm(x))
        assert_real_outputs_close(case, inputs, ours, expected)
        exported = exported_config(ours, tmp_path / "hf")
        assert exported["layer_types"] == layer_types
        # transformers 4.x's `sliding_window_pattern` cannot say it.
        assert "sliding_window_pattern" not in exported
        again = Backbone.from_preset(str(tmp_path / "hf"))
        assert again.get_config()["layer_types"] == layer_types


class TestGemma3VisionCheckpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "gemma3_vision_published_names",
            "Gemma3Backbone",
            _LazyConfig(
                _TEXT,
                image_size=16,
                num_layers=2,
                global_rope_scaling_factor=8.0,
            ),
            writer=tensor_writer(_published_config, _published_tensors),
            inputs=_vision_inputs,
        )
    ]
    meshes = ((2, 4),)


# Config translation and its errors: `config.json` alone, no weights.


def _translate(tmp_path, config):
    (tmp_path / "config.json").write_text(json.dumps(config))
    _, owner, arguments = huggingface_config(Backbone, str(tmp_path))
    return owner.__name__, arguments


def _text_config(**fields):
    config = {
        "model_type": "gemma3_text",
        "vocab_size": 96,
        "num_hidden_layers": 7,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "hidden_size": 32,
        "intermediate_size": 24,
        "query_pre_attn_scalar": 16,
        "sliding_window": 8,
    }
    config.update(fields)
    return {k: v for k, v in config.items() if v is not None}


def test_rope_spellings(tmp_path):
    v4 = _text_config(
        rope_theta=1e6,
        rope_local_base_freq=1e4,
        rope_scaling={"rope_type": "linear", "factor": 8.0},
        sliding_window_pattern=6,
    )
    v5 = _text_config(
        rope_parameters={
            "full_attention": {
                "rope_type": "linear",
                "factor": 8.0,
                "rope_theta": 1e6,
            },
            "sliding_attention": {
                "rope_type": "linear",
                "factor": 2.0,
                "rope_theta": 1e4,
            },
        },
        layer_types=["sliding_attention"] * 5
        + ["full_attention", "sliding_attention"],
    )
    name, old = _translate(tmp_path, v4)
    assert name == "Gemma3Backbone"
    _, new = _translate(tmp_path, v5)
    assert (
        old["global_rope_scaling_factor"],
        new["global_rope_scaling_factor"],
    ) == (8.0, 8.0)
    assert (
        old["local_rope_scaling_factor"],
        new["local_rope_scaling_factor"],
    ) == (1.0, 2.0)
    assert old["use_sliding_window_attention"] is True
    assert new["use_sliding_window_attention"] is True
    # Export writes both spellings; they read back the same.
    exported = GEMMA3.export_config(new)
    assert exported["model_type"] == "gemma3_text"
    assert exported["rope_scaling"] == {"rope_type": "linear", "factor": 8.0}
    _, again = _translate(tmp_path, exported)
    assert again == new


def test_multimodal_defaults_and_pooling(tmp_path):
    config = {
        "model_type": "gemma3",
        "mm_tokens_per_image": 256,
        "text_config": {"hidden_size": 64, "num_hidden_layers": 2},
        "vision_config": {"image_size": 896, "patch_size": 14},
    }
    _, arguments = _translate(tmp_path, config)
    # Gemma3TextConfig's and SiglipVisionConfig's defaults fill the rest.
    assert arguments["vocabulary_size"] == 262_208
    assert arguments["num_query_heads"] == 8
    assert arguments["image_size"] == 896
    encoder = arguments["vision_encoder"]
    assert (encoder["hidden_dim"], encoder["num_layers"]) == (768, 12)
    assert encoder["pool_size"] == 4  # 64 patches a side to 16.
    assert encoder["output_dim"] == 64
    config["mm_tokens_per_image"] = 200
    with pytest.raises(PresetError, match="mm_tokens_per_image=200"):
        _translate(tmp_path, config)
    config["mm_tokens_per_image"] = 256
    config["vision_config"]["vision_use_head"] = True
    with pytest.raises(
        PresetError, match=r"\(vision_config\).*vision_use_head"
    ):
        _translate(tmp_path, config)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"rope_theta": 5e5}, "rope_theta=500000.0"),
        ({"rope_local_base_freq": 5e4}, "rope_local_base_freq=50000.0"),
        (
            {"rope_scaling": {"rope_type": "yarn", "factor": 2.0}},
            "rope_scaling.rope_type='yarn'",
        ),
        ({"sliding_window_pattern": 0}, "sliding_window_pattern"),
        (
            {"layer_types": ["full_attention"] * 6},
            "layer_types=['full_attention', 'full_attention'",
        ),
        ({"tie_word_embeddings": False}, "tie_word_embeddings=False"),
        ({"hidden_activation": "gelu"}, "hidden_activation='gelu'"),
        ({"query_pre_attn_scalar": -100}, "query_pre_attn_scalar"),
        ({"mystery_option": 1}, "['mystery_option'] are not understood"),
    ],
)
def test_unsupported_fields(tmp_path, fields, message):
    with pytest.raises(PresetError, match=re.escape(message)):
        _translate(tmp_path, _text_config(**fields))


@pytest.mark.parametrize(
    "fields, arguments",
    [
        # As published checkpoints use them: any layer pattern (v5
        # `layer_types` or v4 `sliding_window_pattern`), any scalar.
        (
            {"layer_types": ["full_attention"] + ["sliding_attention"] * 6},
            {"layer_types": ["full_attention"] + ["sliding_attention"] * 6},
        ),
        (
            {"sliding_window_pattern": 4},
            {
                "layer_types": (["sliding_attention"] * 3 + ["full_attention"])
                + ["sliding_attention"] * 3
            },
        ),
        (
            {"layer_types": ["sliding_attention"] * 5 + ["full_attention"] * 2},
            {"layer_types": ["sliding_attention"] * 5 + ["full_attention"] * 2},
        ),
        # The default pattern: keras-hub's arguments.
        ({"sliding_window_pattern": 6}, {"layer_types": None}),
        (
            {"query_pre_attn_scalar": 100},
            {"query_pre_attn_scalar": 100, "query_head_dim_normalize": True},
        ),
    ],
)
def test_layer_patterns_and_query_scalars(tmp_path, fields, arguments):
    _, translated = _translate(tmp_path, _text_config(**fields))
    assert {key: translated[key] for key in arguments} == arguments
    assert translated["use_sliding_window_attention"] is True
    # Export writes them back: they translate the same again.
    exported = GEMMA3.export_config(translated)
    _, again = _translate(tmp_path, exported)
    assert again == translated


def test_export_refuses_what_gemma3_cannot_hold(tmp_path):
    _, arguments = _translate(tmp_path, _text_config())
    for name in ("use_query_key_norm", "use_post_ffw_norm"):
        with pytest.raises(ValueError, match=f"{name}=False"):
            GEMMA3.export_config(dict(arguments, **{name: False}))
    with pytest.raises(ValueError, match="is_embedding_model=True"):
        GEMMA3.export_config(dict(arguments, is_embedding_model=True))
