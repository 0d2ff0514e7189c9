"""Llama 4 Hugging Face checkpoints: `llama4_text` and `llama4` in, out.

keras-hub has no Llama 4 to write a checkpoint: the test writes one by
hand from the published tensor names and layouts (`Llama4ForCausalLM`'s,
and `Llama4ForConditionalGeneration`'s with its `language_model.` prefix
and a vision tower), with the weights of a NumPy-oracle case, and checks
that it loads to the oracle's outputs, that export writes the same
tensors bit for bit, and that the export loads back.
"""

import json

import numpy as np
import pytest

from keras_nlp.models import Backbone
from keras_nlp.saving.huggingface import write_huggingface
from tests.models.backbone_checks import assert_close_to_stored
from tests.models.llama4.test_llama4_oracle import ATOL
from tests.models.llama4.test_llama4_oracle import CASES
from tests.models.llama4.test_llama4_oracle import build
from tests.models.llama4.test_llama4_oracle import outputs_of
from tests.models.llama4.test_llama4_oracle import stored

MOE = "llama4_sparse_moe_block/"


def hf_tensors(config, weights):
    """`{Hugging Face name: array}` of our weights, in Hugging Face's
    layouts (a `Linear` weight is `(out, in)`; the expert weights are
    stored as they are used, `(experts, in, out)`)."""
    tensors = {
        "model.embed_tokens.weight": weights["token_embedding/embeddings"],
        "lm_head.weight": weights["token_embedding/reverse_embeddings"].T,
        "model.norm.weight": weights["sequence_output_layernorm/scale"],
    }
    for i in range(config["num_layers"]):
        ours, theirs = f"transformer_layer_{i}/", f"model.layers.{i}."
        attention = ours + "self_attention/"
        for name, proj in (("query", "q"), ("key", "k"), ("value", "v")):
            kernel = weights[attention + name + "/kernel"]
            tensors[theirs + f"self_attn.{proj}_proj.weight"] = kernel.reshape(
                kernel.shape[0], -1
            ).T
        output = weights[attention + "attention_output/kernel"]
        tensors[theirs + "self_attn.o_proj.weight"] = output.reshape(
            -1, output.shape[-1]
        ).T
        tensors[theirs + "input_layernorm.weight"] = weights[
            ours + "self_attention_layernorm/scale"
        ]
        tensors[theirs + "post_attention_layernorm.weight"] = weights[
            ours + "feedforward_layernorm/scale"
        ]
        dense = ours
        if ours + MOE + "sparse_feedforward_gate_dense/kernel" in weights:
            moe = ours + MOE
            tensors[theirs + "feed_forward.router.weight"] = weights[
                moe + "sparse_feedforward_gate_dense/kernel"
            ].T
            tensors[theirs + "feed_forward.experts.gate_up_proj"] = weights[
                moe + "experts/expert_feedforward_gate_dense"
            ]
            tensors[theirs + "feed_forward.experts.down_proj"] = weights[
                moe + "experts/expert_feedforward_output_dense"
            ]
            dense = moe + "shared_expert_dense/"
            theirs += "feed_forward.shared_expert."
        else:
            theirs += "feed_forward."
        for ours_name, proj in (
            ("gate", "gate"),
            ("intermediate", "up"),
            ("output", "down"),
        ):
            tensors[theirs + f"{proj}_proj.weight"] = weights[
                dense + f"feedforward_{ours_name}_dense/kernel"
            ].T
    return {k: np.ascontiguousarray(v) for k, v in tensors.items()}


def hf_text_config(config):
    """`Llama4TextConfig` fields, as `transformers` writes them."""
    rope = [int(x) for x in config.get("no_rope_layers", [1, 1, 1, 0])]
    step = config["interleave_moe_layer_step"]
    fields = {
        "model_type": "llama4_text",
        "architectures": ["Llama4ForCausalLM"],
        "vocab_size": config["vocabulary_size"],
        "hidden_size": config["hidden_dim"],
        "intermediate_size": config["intermediate_dim"],
        "intermediate_size_mlp": config["intermediate_dim_mlp"],
        "num_hidden_layers": config["num_layers"],
        "num_attention_heads": config["num_query_heads"],
        "num_key_value_heads": config["num_key_value_heads"],
        "head_dim": config["head_dim"],
        "hidden_act": "silu",
        "max_position_embeddings": config["max_position_embeddings"],
        "initializer_range": 0.02,
        "rms_norm_eps": config["layer_norm_epsilon"],
        "use_cache": True,
        "pad_token_id": None,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "tie_word_embeddings": False,
        "rope_theta": config["rope_max_wavelength"],
        "attention_dropout": 0.0,
        "num_experts_per_tok": config["top_k"],
        "num_local_experts": config["num_experts"],
        "moe_layers": list(range(step - 1, config["num_layers"], step)),
        "interleave_moe_layer_step": step,
        "use_qk_norm": config["use_qk_norm"],
        "output_router_logits": False,
        "router_aux_loss_coef": 0.001,
        "router_jitter_noise": 0.0,
        "rope_scaling": None,
        "no_rope_layers": rope,
        "no_rope_layer_interval": 4,
        "attention_chunk_size": config["attention_chunk_size"],
        "layer_types": [
            "chunked_attention" if r else "full_attention" for r in rope
        ],
        "attn_temperature_tuning": config["attn_temperature_tuning"],
        "floor_scale": config["floor_scale"],
        "attn_scale": config["attn_scale"],
        "attention_bias": False,
        "cache_implementation": "hybrid",
        "torch_dtype": "float32",
    }
    if config.get("rope_frequency_adjustment_factor") is not None:
        fields["rope_scaling"] = {
            "rope_type": "llama3",
            "factor": config["rope_frequency_adjustment_factor"],
            "low_freq_factor": config["rope_low_freq_factor"],
            "high_freq_factor": config["rope_high_freq_factor"],
            "original_max_position_embeddings": config[
                "rope_pretraining_sequence_length"
            ],
        }
    return fields


def write(path, config_json, tensors):
    from safetensors.numpy import save_file

    path.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(config_json))
    return path


def multimodal(config_json, tensors):
    """The same text model as a `llama4` checkpoint: nested text config,
    `language_model.`-prefixed tensors, a (tiny) vision tower beside."""
    text = dict(config_json, architectures=None)
    top = {
        "model_type": "llama4",
        "architectures": ["Llama4ForConditionalGeneration"],
        "text_config": text,
        "vision_config": {"model_type": "llama4_vision_model"},
        "boi_token_index": 200080,
        "eoi_token_index": 200081,
        "image_token_index": 200092,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }
    prefixed = {f"language_model.{k}": v for k, v in tensors.items()}
    prefixed["vision_model.patch_embedding.linear.weight"] = np.zeros(
        (4, 3), "float32"
    )
    prefixed["multi_modal_projector.linear_1.weight"] = np.zeros(
        (4, 4), "float32"
    )
    return top, prefixed


@pytest.mark.parametrize("name", sorted(CASES))
def test_checkpoints_load_to_the_oracle_and_export_bit_identical(
    name, tmp_path
):
    config = CASES[name]
    _, weights = build(config)
    tensors = hf_tensors(config, weights)
    config_json = hf_text_config(config)
    inputs, expected = stored(name)
    text = write(tmp_path / "text", config_json, tensors)
    mm = write(tmp_path / "multimodal", *multimodal(config_json, tensors))
    for path in (text, mm):
        ours = Backbone.from_preset(str(path))
        assert type(ours).__name__ == "Llama4Backbone"
        assert_close_to_stored(
            outputs_of(ours, inputs), expected, inputs, ATOL, real_only=True
        )
    # Export: `llama4_text` with the same tensors, bit for bit.
    exported = tmp_path / "exported"
    exported.mkdir()
    write_huggingface(ours, str(exported))
    from safetensors.numpy import load_file

    written = {}
    for file in exported.glob("*.safetensors"):
        written.update(load_file(str(file)))
    assert sorted(written) == sorted(tensors)
    for key, value in tensors.items():
        np.testing.assert_array_equal(written[key], value, err_msg=key)
    fields = json.loads((exported / "config.json").read_text())
    assert fields["model_type"] == "llama4_text"
    assert fields["architectures"] == ["Llama4ForCausalLM"]
    for key in (
        "no_rope_layers",
        "moe_layers",
        "layer_types",
        "attention_chunk_size",
        "use_qk_norm",
        "floor_scale",
        "attn_scale",
        "intermediate_size_mlp",
        "rope_scaling",
    ):
        assert fields[key] == config_json[key], key
    again = Backbone.from_preset(str(exported))
    without_name = lambda model: {  # noqa: E731
        k: v for k, v in model.get_config().items() if k != "name"
    }
    assert without_name(again) == without_name(ours)
    assert_close_to_stored(
        outputs_of(again, inputs), expected, inputs, ATOL, real_only=True
    )
