"""Hugging Face `deepseek_v3` checkpoints: export, import, round trip.

keras-hub has no DeepSeek-V3, so there is no other loader to compare
with: the tensors' names and layouts are checked against the published
ones (`transformers`' `DeepseekV3ForCausalLM`: Linear weights `(out, in)`,
per-head rows `head * head_size + feature`), and a checkpoint written by
our exporter loads back to the same weights and outputs. The
multi-token-prediction block of the published checkpoints (layer
`num_hidden_layers`) is skipped on import.
"""

import json

import numpy as np
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from keras_nlp.models import Backbone
from keras_nlp.models import DeepSeekV3Backbone
from tests.saving.huggingface_checkpoints import assert_same_weights
from tests.saving.huggingface_checkpoints import randomize

CONFIG = dict(
    vocabulary_size=64,
    num_layers=2,
    num_query_heads=4,
    hidden_dim=16,
    intermediate_dim=24,
    moe_intermediate_dim=8,
    n_routed_experts=4,
    n_shared_experts=2,
    num_experts_per_tok=2,
    n_group=2,
    topk_group=1,
    routed_scaling_factor=2.5,
    first_k_dense_replace=1,
    q_lora_rank=12,
    kv_lora_rank=8,
    qk_nope_head_dim=4,
    qk_rope_head_dim=2,
    v_head_dim=6,
    rope_scaling_factor=40.0,
    rope_original_max_position_embeddings=16,
    rope_mscale=1.0,
    rope_mscale_all_dims=1.0,
)
INPUTS = {
    "token_ids": np.array([[0, 0, 5, 9, 2, 7], [3, 1, 4, 1, 5, 9]], "int32"),
    "padding_mask": np.array([[0, 0, 1, 1, 1, 1], [1] * 6], "int32"),
}


def _variable(model, path):
    (value,) = [w.numpy() for w in model.weights if w.path == path]
    return value


def test_export_writes_the_published_names_and_layouts(tmp_path):
    ours = randomize(DeepSeekV3Backbone(**CONFIG))
    ours.save_to_preset(str(tmp_path), format="huggingface")
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "deepseek_v3"
    assert config["architectures"] == ["DeepseekV3ForCausalLM"]
    assert config["rope_scaling"]["type"] == "yarn"
    assert config["rope_scaling"]["factor"] == 40.0
    assert config["rope_scaling"]["mscale_all_dim"] == 1.0
    assert config["q_lora_rank"] == 12 and config["n_group"] == 2
    tensors = load_file(str(tmp_path / "model.safetensors"))
    attention = "model.layers.1.self_attn."
    shapes = {name: tensors[name].shape for name in tensors}
    assert shapes[attention + "q_a_proj.weight"] == (12, 16)
    assert shapes[attention + "q_a_layernorm.weight"] == (12,)
    assert shapes[attention + "q_b_proj.weight"] == (4 * 6, 12)
    assert shapes[attention + "kv_a_proj_with_mqa.weight"] == (8 + 2, 16)
    assert shapes[attention + "kv_a_layernorm.weight"] == (8,)
    assert shapes[attention + "kv_b_proj.weight"] == (4 * (4 + 6), 8)
    assert shapes[attention + "o_proj.weight"] == (16, 4 * 6)
    assert shapes["model.layers.1.mlp.gate.weight"] == (4, 16)
    assert shapes["model.layers.1.mlp.gate.e_score_correction_bias"] == (4,)
    assert shapes["model.layers.1.mlp.experts.3.up_proj.weight"] == (8, 16)
    assert shapes["model.layers.1.mlp.shared_experts.down_proj.weight"] == (
        16,
        16,
    )
    assert shapes["model.layers.0.mlp.gate_proj.weight"] == (24, 16)
    assert not any(n.startswith("model.layers.0.mlp.experts") for n in tensors)
    # kv_b_proj row `head * (nope + v) + feature` is our kernel's
    # `[:, head, feature]`: the key part of head 2, then its value.
    kv_b = _variable(
        ours, "transformer_layer_1/self_attention/key_value_b/kernel"
    )
    np.testing.assert_array_equal(
        tensors[attention + "kv_b_proj.weight"][2 * 10 + 4], kv_b[:, 2, 4]
    )
    expert = _variable(
        ours,
        "transformer_layer_1/sparse_moe_block/experts/"
        "expert_feedforward_gate_dense",
    )
    np.testing.assert_array_equal(
        tensors["model.layers.1.mlp.experts.3.gate_proj.weight"], expert[3].T
    )


def test_round_trip_and_the_prediction_block_is_skipped(tmp_path):
    ours = randomize(DeepSeekV3Backbone(**CONFIG))
    ours.save_to_preset(str(tmp_path), format="huggingface")
    again = Backbone.from_preset(str(tmp_path))
    assert isinstance(again, DeepSeekV3Backbone)
    assert again.get_config() == {**ours.get_config(), "name": again.name}
    assert_same_weights(again, ours)
    np.testing.assert_allclose(
        np.asarray(again(INPUTS)), np.asarray(ours(INPUTS)), atol=1e-6
    )
    # A published checkpoint's multi-token-prediction block: layer 2 here.
    tensors = load_file(str(tmp_path / "model.safetensors"))
    extra = {
        "model.layers.2.enorm.weight": np.ones(16, "float32"),
        "model.layers.2.eh_proj.weight": np.ones((16, 32), "float32"),
        "model.layers.2.self_attn.q_a_proj.weight": np.ones(
            (12, 16), "float32"
        ),
        "model.layers.2.mlp.experts.0.up_proj.weight": np.ones(
            (8, 16), "float32"
        ),
    }
    save_file({**tensors, **extra}, str(tmp_path / "model.safetensors"))
    config = json.loads((tmp_path / "config.json").read_text())
    config["num_nextn_predict_layers"] = 1
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert_same_weights(Backbone.from_preset(str(tmp_path)), ours)


def test_plain_query_and_unscaled_rope_round_trip(tmp_path):
    config = {
        **CONFIG,
        "q_lora_rank": None,
        "rope_scaling_factor": 1.0,
        "first_k_dense_replace": 0,
    }
    ours = randomize(DeepSeekV3Backbone(**config))
    ours.save_to_preset(str(tmp_path), format="huggingface")
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["q_lora_rank"] is None and "rope_scaling" not in written
    names = load_file(str(tmp_path / "model.safetensors"))
    assert names["model.layers.0.self_attn.q_proj.weight"].shape == (24, 16)
    assert_same_weights(Backbone.from_preset(str(tmp_path)), ours)


def test_transformers_5_rope_parameters_load_alike(tmp_path):
    ours = randomize(DeepSeekV3Backbone(**CONFIG))
    ours.save_to_preset(str(tmp_path), format="huggingface")
    config = json.loads((tmp_path / "config.json").read_text())
    scaling = config.pop("rope_scaling")
    del scaling["type"]
    config["rope_parameters"] = {
        **scaling,
        "rope_theta": config.pop("rope_theta"),
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    again = Backbone.from_preset(str(tmp_path))
    assert again.get_config() == {**ours.get_config(), "name": again.name}


# deepseek-ai/DeepSeek-V3's config.json, as published.
PUBLISHED = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "aux_loss_alpha": 0.001,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "ep_size": 1,
    "first_k_dense_replace": 3,
    "hidden_act": "silu",
    "hidden_size": 7168,
    "initializer_range": 0.02,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "n_group": 8,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_attention_heads": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1,
    "pretraining_tp": 1,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
    "rms_norm_eps": 1e-06,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
    "rope_theta": 10000,
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "seq_aux": True,
    "tie_word_embeddings": False,
    "topk_group": 4,
    "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16",
    "transformers_version": "4.33.1",
    "use_cache": True,
    "v_head_dim": 128,
    "vocab_size": 129280,
}


def test_the_published_config_is_the_built_in_preset():
    from keras_nlp.models.deepseek_v3.deepseek_v3_huggingface import DEEPSEEK_V3

    config = DEEPSEEK_V3.translate(PUBLISHED, "config.json", DeepSeekV3Backbone)
    preset = DeepSeekV3Backbone.presets["deepseek_v3_671b"]
    assert config == {**preset, "dropout": 0.0}
