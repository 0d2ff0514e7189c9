"""Hugging Face `paligemma` checkpoints against keras-hub.

PaliGemma 1 (a `gemma` text config) is written by `tensor_writer` in the
layout of the published checkpoints (`language_model.model.*`,
`vision_tower.vision_model.*`, `multi_modal_projector.linear.*`, nested
configs of non-default fields), which keras-hub's `convert_pali_gemma`
reads; keras-hub has no PaliGemma exporter. keras-hub's converter takes the
text's `head_dim` from `num_image_tokens`, so the tiny model has 16 of each.

keras-hub's converter ignores Gemma 2's options (and reads Gemma 2's
`post_attention_layernorm` as the pre-feed-forward norm), so PaliGemma 2 is
checked against the keras-hub model the checkpoint was written from
instead of its loader; its checkpoint has current `transformers`' names
(`model.language_model.*`, ...). Export writes the published names.
"""

import json
import re

import numpy as np
import pytest
from safetensors.numpy import load_file

from keras_nlp.cli import main
from keras_nlp.models import Backbone
from keras_nlp.models.pali_gemma import PaliGemmaBackbone
from keras_nlp.models.pali_gemma.pali_gemma_huggingface import IMAGE_TOKEN_ROWS
from keras_nlp.models.pali_gemma.pali_gemma_huggingface import PALI_GEMMA
from keras_nlp.models.pali_gemma.pali_gemma_presets import PALI_GEMMA_PRESETS
from keras_nlp.saving import PresetError
from keras_nlp.saving.huggingface import huggingface_config
from tests.models.backbone_checks import output_arrays
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import assert_same_weights
from tests.saving.huggingface_checkpoints import randomize
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.huggingface_checkpoints import with_defaults
from tests.saving.test_huggingface_gemma import gemma_tensors
from tests.saving.test_huggingface_gemma3 import siglip_tower_tensors

# 16x16 images in 4x4 patches: 16 image tokens, and a text head_dim of 16.
_VISION = dict(
    image_size=16,
    vit_patch_size=4,
    vit_num_heads=8,
    vit_hidden_dim=32,
    vit_num_layers=1,
    vit_intermediate_dim=24,
)
_PALI_GEMMA = dict(
    _VISION,
    vocabulary_size=64,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=1,
    hidden_dim=32,
    intermediate_dim=64,
    head_dim=16,
)
# Gemma 2: 4:2 heads, queries scaled by (32 / 4) ** -0.5, a window of 6
# over 16 patches + 8 tokens, Gemma 2's default soft caps.
_PALI_GEMMA2 = dict(
    _VISION,
    vocabulary_size=64,
    num_layers=3,
    num_query_heads=4,
    num_key_value_heads=2,
    hidden_dim=32,
    intermediate_dim=64,
    head_dim=16,
    query_head_dim_normalize=False,
    use_post_ffw_norm=True,
    use_post_attention_norm=True,
    attention_logit_soft_cap=50.0,
    final_logit_soft_cap=30.0,
    use_sliding_window_attention=True,
    sliding_window_size=6,
)


def _inputs(vocabulary_size, length=8):
    rng = np.random.default_rng(0)
    padding_mask = np.ones((2, length), "int32")
    padding_mask[1, length - 2 :] = 0
    response_mask = np.zeros((2, length), "int32")
    response_mask[:, length // 2 :] = 1
    response_mask[1, length - 2 :] = 0
    return {
        "images": rng.uniform(-1, 1, (2, 16, 16, 3)).astype("float32"),
        "token_ids": rng.integers(1, vocabulary_size, (2, length)).astype(
            "int32"
        ),
        "padding_mask": padding_mask,
        "response_mask": response_mask,
    }


def _sequence(inputs, outputs):
    # Every position: with the prefix-LM mask each one sees the image.
    return output_arrays(outputs)["sequence_output"]


def _array(variable):
    return np.asarray(variable.numpy())


def _vision_config(oracle):
    encoder = oracle.vit_encoder.get_layer("image_encoder")
    return {
        "model_type": "siglip_vision_model",
        "hidden_size": encoder.hidden_dim,
        "intermediate_size": encoder.intermediate_dim,
        "num_attention_heads": encoder.num_heads,
        "num_hidden_layers": encoder.num_layers,
        "image_size": oracle.image_size,
        "patch_size": encoder.patch_size,
        "num_image_tokens": oracle.image_sequence_length,
        "projection_dim": oracle.hidden_dim,
        "projector_hidden_act": "gelu_fast",
        "vision_use_head": False,
    }


def _text_config(oracle, **fields):
    return {
        "hidden_size": oracle.hidden_dim,
        "intermediate_size": oracle.intermediate_dim // 2,
        "num_attention_heads": oracle.num_query_heads,
        "num_hidden_layers": oracle.num_layers,
        "num_key_value_heads": oracle.num_key_value_heads,
        "head_dim": oracle.head_dim,
        "num_image_tokens": oracle.image_sequence_length,
        "vocab_size": oracle.vocabulary_size + IMAGE_TOKEN_ROWS,
        **fields,
    }


def _published_config(oracle):
    """Like google/paligemma-3b-pt-224's."""
    return {
        "architectures": ["PaliGemmaForConditionalGeneration"],
        "model_type": "paligemma",
        "bos_token_id": 2,
        "eos_token_id": 1,
        "pad_token_id": 0,
        # A stale 2048 in Google's configs; never the text's width here.
        "hidden_size": 2048,
        "ignore_index": -100,
        "image_token_index": oracle.vocabulary_size,
        "projection_dim": oracle.hidden_dim,
        "text_config": _text_config(
            oracle, model_type="gemma", torch_dtype="float32"
        ),
        "vision_config": _vision_config(oracle),
        "torch_dtype": "float32",
        "transformers_version": "4.41.0.dev0",
    }


def _tensors(oracle, text, tower, projector, gemma2_norms=False):
    tensors = gemma_tensors(oracle, text, gemma2_norms=gemma2_norms)
    # The `<image>` token's and padding rows, which are not loaded.
    embedding = tensors[text + "embed_tokens.weight"]
    extra = np.full((IMAGE_TOKEN_ROWS, embedding.shape[1]), 7.0, "float32")
    tensors[text + "embed_tokens.weight"] = np.concatenate([embedding, extra])
    encoder = oracle.vit_encoder.get_layer("image_encoder")
    tensors.update(siglip_tower_tensors(encoder, tower))
    projection = oracle.vit_encoder.get_layer("image_classifier")
    tensors[projector + "linear.weight"] = _array(projection.kernel).T
    tensors[projector + "linear.bias"] = _array(projection.bias)
    return tensors


def _published_tensors(oracle):
    return _tensors(
        oracle,
        "language_model.model.",
        "vision_tower.vision_model.",
        "multi_modal_projector.",
    )


class TestPaliGemmaCheckpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "pali_gemma_published_names",
            "PaliGemmaBackbone",
            _PALI_GEMMA,
            writer=tensor_writer(_published_config, _published_tensors),
            inputs=_inputs,
            outputs=_sequence,
        )
    ]
    # (1, 8) costs as much again and shards nothing (2, 4) does not.
    meshes = ((2, 4),)


# PaliGemma 2: current names, Gemma 2's defaults omitted from the config.


def _pali_gemma2_config(oracle):
    return {
        "architectures": ["PaliGemmaForConditionalGeneration"],
        "model_type": "paligemma",
        "hidden_size": 2048,
        "image_token_index": oracle.vocabulary_size,
        "projection_dim": oracle.hidden_dim,
        # Soft caps 50 and 30 are Gemma 2's defaults.
        "text_config": _text_config(
            oracle,
            model_type="gemma2",
            hidden_activation="gelu_pytorch_tanh",
            query_pre_attn_scalar=oracle.hidden_dim // oracle.num_query_heads,
            sliding_window=oracle.sliding_window_size,
            use_bidirectional_attention=True,
        ),
        "vision_config": _vision_config(oracle),
        "transformers_version": "4.53.0",
    }


@pytest.fixture(scope="module")
def pali_gemma2(tmp_path_factory):
    import keras_hub

    oracle = randomize(keras_hub.models.PaliGemmaBackbone(**_PALI_GEMMA2))
    # keras-hub's Gemma block builds its attention with
    # `query_head_dim_normalize=True` whatever the backbone says; the flag
    # is read at call time.
    for block in oracle.transformer_layers:
        block.attention.query_head_dim_normalize = False
    path = tmp_path_factory.mktemp("pali_gemma2")
    tensors = _tensors(
        oracle,
        "model.language_model.",
        "model.vision_tower.vision_model.",
        "model.multi_modal_projector.",
        gemma2_norms=True,
    )
    tensors["lm_head.weight"] = tensors[
        "model.language_model.embed_tokens.weight"
    ]
    tensor_writer(_pali_gemma2_config, lambda _: tensors)(oracle, path)
    inputs = _inputs(_PALI_GEMMA2["vocabulary_size"])
    return path, oracle, inputs


def test_pali_gemma2_loads_like_keras_hub_and_round_trips(
    pali_gemma2, tmp_path
):
    path, oracle, inputs = pali_gemma2
    ours = Backbone.from_preset(str(path))
    assert ours.get_config()["attention_logit_soft_cap"] == 50.0
    assert_same_weights(ours, oracle)
    expected = _sequence(inputs, oracle(inputs))
    np.testing.assert_allclose(
        _sequence(inputs, ours(inputs)), expected, atol=1e-5, rtol=1e-5
    )
    ours.save_to_preset(str(tmp_path / "hf"), format="huggingface")
    exported = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert exported["text_config"]["model_type"] == "gemma2"
    assert exported["text_config"]["vocab_size"] == 64 + IMAGE_TOKEN_ROWS
    assert exported["image_token_index"] == 64
    # The published names, which keras-hub and every transformers read.
    embedding = load_file(str(tmp_path / "hf" / "model.safetensors"))[
        "language_model.model.embed_tokens.weight"
    ]
    assert embedding.shape == (64 + IMAGE_TOKEN_ROWS, 32)
    np.testing.assert_array_equal(embedding[64:], 0)
    again = Backbone.from_preset(str(tmp_path / "hf"))
    assert {**again.get_config(), "name": None} == {
        **ours.get_config(),
        "name": None,
    }
    assert_same_weights(again, ours)


# Config translation and its errors: `config.json` alone, no weights.


def _translate(tmp_path, config):
    (tmp_path / "config.json").write_text(json.dumps(config))
    _, owner, arguments = huggingface_config(Backbone, str(tmp_path))
    return owner.__name__, arguments


# google/paligemma-3b-pt-224's and google/paligemma2-3b-pt-224's
# `config.json` (token ids and versions left out).
_SIGLIP = {
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "model_type": "siglip_vision_model",
    "num_attention_heads": 16,
    "num_hidden_layers": 27,
    "num_image_tokens": 256,
    "patch_size": 14,
    "projector_hidden_act": "gelu_fast",
    "vision_use_head": False,
}
PUBLISHED = {
    "pali_gemma_3b_224": {
        "model_type": "paligemma",
        "hidden_size": 2048,
        "ignore_index": -100,
        "image_token_index": 257152,
        "projection_dim": 2048,
        "text_config": {
            "hidden_size": 2048,
            "intermediate_size": 16384,
            "model_type": "gemma",
            "num_attention_heads": 8,
            "num_hidden_layers": 18,
            "num_image_tokens": 256,
            "num_key_value_heads": 1,
            "torch_dtype": "float32",
            "vocab_size": 257216,
        },
        "vision_config": dict(_SIGLIP, projection_dim=2048),
    },
    "pali_gemma2_pt_3b_224": {
        "model_type": "paligemma",
        "hidden_size": 2048,
        "image_token_index": 257152,
        "projection_dim": 2304,
        "text_config": {
            "hidden_activation": "gelu_pytorch_tanh",
            "hidden_size": 2304,
            "intermediate_size": 9216,
            "model_type": "gemma2",
            "num_hidden_layers": 26,
            "num_image_tokens": 256,
            "num_key_value_heads": 4,
            "query_pre_attn_scalar": 256,
            "sliding_window": 4096,
            "torch_dtype": "bfloat16",
            "vocab_size": 257216,
        },
        "vision_config": dict(_SIGLIP, projection_dim=2304),
    },
}


@pytest.mark.parametrize("preset", sorted(PUBLISHED))
def test_published_configs_are_the_presets(tmp_path, preset):
    name, arguments = _translate(tmp_path, PUBLISHED[preset])
    assert name == "PaliGemmaBackbone"
    expected = PALI_GEMMA_PRESETS[preset]
    assert {k: arguments.get(k) for k in expected} == expected
    # The rest are the constructor's defaults.
    assert arguments["layer_norm_epsilon"] == 1e-6
    assert arguments["dropout"] == 0.0
    # And back: the preset exports to a config that reads the same.
    exported = PALI_GEMMA.export_config(
        with_defaults(PaliGemmaBackbone, arguments)
    )
    assert exported["text_config"]["vocab_size"] == 257216
    assert exported["image_token_index"] == 257152
    assert _translate(tmp_path, exported)[1] == arguments


def _published(**changes):
    config = json.loads(json.dumps(PUBLISHED["pali_gemma2_pt_3b_224"]))
    for key, value in changes.items():
        where = config
        *parents, field = key.split(".")
        for parent in parents:
            where = where[parent]
        where[field] = value
    return config


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"text_config.vocab_size": 257152},
            "image_token_index=257152 changes the architecture",
        ),
        ({"projection_dim": 2048}, "projection_dim=2048"),
        (
            {"vision_config.num_image_tokens": 1024},
            "(vision_config): num_image_tokens=1024",
        ),
        (
            {"text_config.model_type": "llama"},
            "text_config.model_type='llama'",
        ),
        (
            {"text_config.use_bidirectional_attention": False},
            "use_bidirectional_attention=False",
        ),
        ({"image_token_id": 5}, "image_token_id=5"),
        ({"vision_config.vision_use_head": True}, "vision_use_head=True"),
        (
            {"vision_config.hidden_act": "gelu"},
            "(vision_config): hidden_act='gelu'",
        ),
        (
            {"mystery": 1},
            "['mystery'] are not understood",
        ),
        (
            {"vision_config.mystery": 1},
            "(vision_config): field(s) ['mystery'] are not understood",
        ),
    ],
)
def test_unsupported_fields(tmp_path, changes, message):
    with pytest.raises(PresetError, match=re.escape(message)):
        _translate(tmp_path, _published(**changes))


def test_export_refuses_what_paligemma_cannot_hold(tmp_path):
    _, arguments = _translate(tmp_path, _published())
    with pytest.raises(ValueError, match="vit_classifier_activation='gelu'"):
        PALI_GEMMA.export_config(
            dict(arguments, vit_classifier_activation="gelu")
        )
    with pytest.raises(ValueError, match="use_post_ffw_norm=False"):
        PALI_GEMMA.export_config(dict(arguments, use_post_ffw_norm=False))


def test_plan_cli_on_a_checkpoint_config(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps(_published()))
    assert main(["plan", str(tmp_path), "--mesh", "1x8", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert (
        main(["plan", "pali_gemma2_pt_3b_224", "--mesh", "1x8", "--json"]) == 0
    )
    preset = json.loads(capsys.readouterr().out)
    assert plan["total_params"] == preset["total_params"]
    weights = {w["path"]: w for w in plan["weights"]}
    assert weights == {w["path"]: w for w in preset["weights"]}
    assert weights["image_classifier/kernel"]["spec"] == ["batch", "model"]
    query = "image_encoder/encoder_block_0/multi_head_attention/query_proj"
    assert weights[query + "/kernel"]["spec"] == ["batch", "model"]
