"""Hugging Face checkpoints of the Llama-style families against keras-hub.

See `tests/saving/huggingface_checkpoints.py`: each class below is the
whole test of a family; a case is one tiny checkpoint.
"""

import keras
import numpy as np
import pytest

from tests.models.backbone_checks import output_arrays
from tests.models.tiny_configs import t5gemma_config
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import tensor_writer

_SMALL = dict(
    vocabulary_size=96, num_layers=2, hidden_dim=32, intermediate_dim=48
)


class TestLlamaCheckpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "llama3_gqa",
            "Llama3Backbone",
            dict(_SMALL, num_query_heads=8, num_key_value_heads=2),
        ),
        # Llama 3.2: tied output embedding, Llama 3.1 RoPE scaling, its
        # 131072 positions (written back as read) and token ids, two of
        # them outside this vocabulary (written back as null).
        HFCase(
            "llama3_tied_rope_scaled",
            "Llama3Backbone",
            dict(
                _SMALL,
                num_query_heads=4,
                num_key_value_heads=4,
                tie_word_embeddings=True,
                rope_max_wavelength=500000,
                rope_frequency_adjustment_factor=8.0,
                rope_low_freq_factor=1.0,
                rope_high_freq_factor=4.0,
                rope_pretraining_sequence_length=4,
            ),
            config_patch={
                "max_position_embeddings": 131072,
                "bos_token_id": 128000,
                "eos_token_id": [1, 128009],
                "pad_token_id": None,
            },
        ),
    ]


class TestMistralCheckpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "mistral_window",
            "MistralBackbone",
            dict(
                _SMALL,
                num_query_heads=8,
                num_key_value_heads=2,
                sliding_window=4,
            ),
        )
    ]


class TestQwen2Checkpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "qwen2_tied",
            "QwenBackbone",
            dict(
                _SMALL,
                num_query_heads=8,
                num_key_value_heads=2,
                tie_word_embeddings=True,
            ),
            # keras-hub's exporter omits these; its loader requires them.
            config_patch={"use_sliding_window": False, "sliding_window": 32768},
        )
    ]


def _qwen3_config(oracle):
    return {
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
        "vocab_size": oracle.vocabulary_size,
        "num_hidden_layers": oracle.num_layers,
        "num_attention_heads": oracle.num_query_heads,
        "num_key_value_heads": oracle.num_key_value_heads,
        "head_dim": oracle.head_dim,
        "hidden_size": oracle.hidden_dim,
        "intermediate_size": oracle.intermediate_dim,
        "rms_norm_eps": oracle.layer_norm_epsilon,
        "rope_theta": oracle.rope_max_wavelength,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": oracle.num_layers,
        "tie_word_embeddings": oracle.tie_word_embeddings,
        "hidden_act": "silu",
        "attention_bias": False,
        "torch_dtype": "float32",
    }


def _qwen3_tensors(oracle):
    """Named as keras-hub's `convert_qwen3` reads them (PyTorch layouts)."""
    tensors = {
        "model.embed_tokens.weight": oracle.token_embedding.embeddings,
        "model.norm.weight": oracle.layer_norm.scale,
    }
    if not oracle.tie_word_embeddings:
        tensors["lm_head.weight"] = (
            oracle.token_embedding.reverse_embeddings.numpy().T
        )
    for i, layer in enumerate(oracle.transformer_layers):
        prefix = f"model.layers.{i}."
        attention = layer._self_attention_layer
        hidden = oracle.hidden_dim
        tensors.update(
            {
                prefix + "input_layernorm.weight": (
                    layer._self_attention_layernorm.scale
                ),
                prefix + "post_attention_layernorm.weight": (
                    layer._feedforward_layernorm.scale
                ),
                prefix + "self_attn.q_norm.weight": (
                    attention._query_dense_layer_norm.scale
                ),
                prefix + "self_attn.k_norm.weight": (
                    attention._key_dense_layer_norm.scale
                ),
                prefix + "mlp.gate_proj.weight": (
                    layer._feedforward_gate_dense.kernel.numpy().T
                ),
                prefix + "mlp.up_proj.weight": (
                    layer._feedforward_intermediate_dense.kernel.numpy().T
                ),
                prefix + "mlp.down_proj.weight": (
                    layer._feedforward_output_dense.kernel.numpy().T
                ),
                prefix + "self_attn.o_proj.weight": (
                    attention._output_dense.kernel.numpy().reshape(-1, hidden).T
                ),
            }
        )
        for name, dense in (
            ("q", attention._query_dense),
            ("k", attention._key_dense),
            ("v", attention._value_dense),
        ):
            kernel = dense.kernel.numpy().reshape(hidden, -1)
            tensors[prefix + f"self_attn.{name}_proj.weight"] = kernel.T
    return tensors


class TestQwen3Checkpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "qwen3_untied",
            "Qwen3Backbone",
            dict(
                _SMALL,
                num_query_heads=4,
                num_key_value_heads=2,
                head_dim=16,
                tie_word_embeddings=False,
            ),
            writer=tensor_writer(_qwen3_config, _qwen3_tensors),
        )
    ]


def _smollm3_config(oracle):
    return {
        "model_type": "smollm3",
        "architectures": ["SmolLM3ForCausalLM"],
        "vocab_size": oracle.vocabulary_size,
        "num_hidden_layers": oracle.num_layers,
        "num_attention_heads": oracle.num_attention_heads,
        "num_key_value_heads": oracle.num_key_value_heads,
        "hidden_size": oracle.hidden_dim,
        "intermediate_size": oracle.intermediate_dim,
        "hidden_act": "silu",
        "max_position_embeddings": oracle.max_position_embeddings,
        "initializer_range": 0.02,
        "rms_norm_eps": oracle.layer_norm_epsilon,
        "use_cache": True,
        "pad_token_id": None,
        "bos_token_id": None,
        "eos_token_id": 1,
        "rope_theta": oracle.rope_theta,
        "rope_scaling": None,
        "use_sliding_window": False,
        "sliding_window": None,
        "no_rope_layers": [int(x) for x in oracle.rope_layer_enabled_list],
        "no_rope_layer_interval": 4,
        "layer_types": oracle.layer_types,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }


def _smollm3_tensors(oracle):
    """Named as keras-hub's `convert_smollm3` reads them."""
    tensors = {
        "model.embed_tokens.weight": oracle.token_embedding.embeddings,
        "model.norm.weight": oracle.norm.scale,
    }
    for i, layer in enumerate(oracle.transformer_layers):
        prefix = f"model.layers.{i}."
        attention = layer.self_attn
        output = attention.o_proj.kernel.numpy()
        tensors.update(
            {
                prefix + "input_layernorm.weight": layer.input_layernorm.scale,
                prefix + "post_attention_layernorm.weight": (
                    layer.post_attention_layernorm.scale
                ),
                prefix + "self_attn.o_proj.weight": (
                    output.reshape(-1, output.shape[-1]).T
                ),
            }
        )
        for name in ("q_proj", "k_proj", "v_proj"):
            kernel = getattr(attention, name).kernel.numpy()
            tensors[prefix + f"self_attn.{name}.weight"] = kernel.T
        for name in ("gate_proj", "up_proj", "down_proj"):
            kernel = getattr(layer.mlp, name).kernel.numpy()
            tensors[prefix + f"mlp.{name}.weight"] = kernel.T
    return tensors


def _smollm3_as_ours(oracle):
    """keras-hub's weights as `assert_same_weights` groups ours (by path
    without block numbers, in block order): its query, key and value
    kernels with the heads a dimension of their own, its output
    projections (`o_proj/kernel` in every block) by block, without its
    RoPE frequencies (constants of ours)."""
    weights = {
        "token_embedding/embeddings": [oracle.token_embedding.embeddings],
        "sequence_output_layernorm/scale": [oracle.norm.scale],
    }
    block = "transformer_layer/"
    for layer in oracle.transformer_layers:
        attention = layer.self_attn
        values = {
            f"{name}/scale": getattr(layer, name).scale
            for name in ("input_layernorm", "post_attention_layernorm")
        }
        for name in ("gate_proj", "up_proj", "down_proj"):
            values[f"mlp/{name}/kernel"] = getattr(layer.mlp, name).kernel
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            kernel = keras.ops.convert_to_numpy(getattr(attention, name).kernel)
            if name != "o_proj":
                kernel = kernel.reshape(kernel.shape[0], -1, attention.head_dim)
            values[f"self_attn/{name}/kernel"] = kernel
        for path, value in values.items():
            weights.setdefault(block + path, []).append(value)
    return {
        path: [keras.ops.convert_to_numpy(v) for v in values]
        for path, values in weights.items()
    }


class TestSmolLM3Checkpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "smollm3_rope_off_1",
            "SmolLM3Backbone",
            dict(
                _SMALL,
                num_attention_heads=4,
                num_key_value_heads=2,
                attention_bias=False,
                attention_dropout=0.0,
                rope_layer_enabled_list=[True, False],
                layer_types=["full_attention"] * 2,
                mlp_bias=False,
                layer_norm_epsilon=1e-6,
                max_position_embeddings=128,
                rope_theta=5000000.0,
                partial_rotary_factor=1.0,
            ),
            writer=tensor_writer(_smollm3_config, _smollm3_tensors),
            theirs_as_ours=_smollm3_as_ours,
        )
    ]


_T5GEMMA_SIDES = ("encoder", "decoder")


def _t5gemma_side_config(oracle, side):
    fields = {
        "model_type": "t5_gemma_module",
        "vocab_size": oracle.vocabulary_size,
        "hidden_size": getattr(oracle, f"{side}_hidden_dim"),
        "intermediate_size": getattr(oracle, f"{side}_intermediate_dim"),
        "num_hidden_layers": getattr(oracle, f"{side}_num_layers"),
        "num_attention_heads": getattr(oracle, f"{side}_num_attention_heads"),
        "num_key_value_heads": getattr(oracle, f"{side}_num_key_value_heads"),
        "head_dim": getattr(oracle, f"{side}_head_dim"),
        "layer_types": getattr(oracle, f"{side}_layer_types"),
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": 8192,
        "initializer_range": 0.02,
        "rms_norm_eps": oracle.rms_norm_eps,
        "use_cache": True,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "bos_token_id": 2,
        "rope_theta": oracle.rope_max_wavelength,
        "attention_bias": oracle.attention_bias,
        "attention_dropout": 0.0,
        "query_pre_attn_scalar": oracle.query_pre_attn_scalar,
        "sliding_window": oracle.sliding_window,
        "final_logit_softcapping": oracle.final_logit_softcapping,
        "attn_logit_softcapping": oracle.attn_logit_softcapping,
        "dropout_rate": 0.0,
    }
    if side == "decoder":
        fields.update(
            is_decoder=True,
            cross_attention_hidden_size=oracle.encoder_hidden_dim,
        )
    return fields


def _t5gemma_config(oracle):
    """`config.json` as transformers' T5GemmaConfig writes it."""
    return {
        "model_type": "t5gemma",
        "architectures": ["T5GemmaForConditionalGeneration"],
        "encoder": _t5gemma_side_config(oracle, "encoder"),
        "decoder": _t5gemma_side_config(oracle, "decoder"),
        "is_encoder_decoder": True,
        "dropout_rate": 0.0,
        "classifier_dropout_rate": 0.0,
        "attention_dropout": 0.0,
        "tie_word_embeddings": True,
        "vocab_size": oracle.vocabulary_size,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "bos_token_id": 2,
        "decoder_start_token_id": 2,
        "torch_dtype": "float32",
    }


def _t5gemma_tensors(oracle):
    """Named as keras-hub's `convert_t5gemma` reads them, with
    `T5GemmaForConditionalGeneration`'s `model.` prefix and its tied
    `lm_head.out_proj`."""
    tensors = {
        "lm_head.out_proj.weight": oracle.decoder_token_embedding.embeddings
    }
    for side, embedding in zip(
        _T5GEMMA_SIDES,
        (oracle.token_embedding, oracle.decoder_token_embedding),
        strict=True,
    ):
        prefix = f"model.{side}."
        tensors[prefix + "embed_tokens.weight"] = embedding.embeddings
        tensors[prefix + "norm.weight"] = getattr(oracle, f"{side}_norm").scale
        for i, layer in enumerate(getattr(oracle, f"{side}_layers")):
            block = f"{prefix}layers.{i}."
            attentions = [("self_attn", layer.self_attn)]
            norms = ["pre_self_attn", "post_self_attn"]
            if side == "decoder":
                attentions.append(("cross_attn", layer.cross_attn))
                norms += ["pre_cross_attn", "post_cross_attn"]
            for name, attention in attentions:
                output = attention.output_dense.kernel.numpy()
                tensors[block + f"{name}.o_proj.weight"] = output.reshape(
                    -1, output.shape[-1]
                ).T
                for proj in ("query", "key", "value"):
                    kernel = getattr(attention, f"{proj}_dense").kernel.numpy()
                    tensors[block + f"{name}.{proj[0]}_proj.weight"] = (
                        kernel.reshape(kernel.shape[0], -1).T
                    )
            for norm in norms:
                tensors[block + f"{norm}_layernorm.weight"] = getattr(
                    layer, f"{norm}_layernorm"
                ).scale
            for norm in ("pre_feedforward", "post_feedforward"):
                tensors[block + f"{norm}_layernorm.weight"] = getattr(
                    layer, f"{norm}_layernorm"
                ).scale
            for name in ("gate_proj", "up_proj", "down_proj"):
                kernel = getattr(layer.mlp, name).kernel.numpy()
                tensors[block + f"mlp.{name}.weight"] = kernel.T
    return tensors


def _t5gemma_inputs(vocabulary_size):
    from tests.models.tiny_configs import _seq2seq_inputs

    return _seq2seq_inputs(
        {"vocabulary_size": vocabulary_size}, batch=2, length=10
    )


def _both_sides_real(inputs, outputs):
    """Both sides' outputs at their real tokens, one after the other."""
    outputs = output_arrays(outputs)
    return np.concatenate(
        [
            outputs[f"{side}_sequence_output"][
                np.asarray(inputs[f"{side}_padding_mask"]).astype(bool)
            ].ravel()
            for side in _T5GEMMA_SIDES
        ]
    )


class TestT5GemmaCheckpoints(HuggingFaceFamilyTests):
    # Compiling the encoder-decoder on a mesh costs more than loading.
    meshes = ((2, 4),)
    cases = [
        HFCase(
            "t5gemma_wide_encoder",
            "T5GemmaBackbone",
            t5gemma_config(
                (48, 64, 4, 2, 8),
                (32, 48, 4, 1, 8),
                ("sliding_attention", "full_attention"),
                sliding_window=4,
                query_pre_attn_scalar=8.0,
                attn_logit_softcapping=50.0,
                final_logit_softcapping=30.0,
                cross_attention_hidden_size=48,
            ),
            writer=tensor_writer(_t5gemma_config, _t5gemma_tensors),
            inputs=_t5gemma_inputs,
            outputs=_both_sides_real,
        )
    ]


def _t5gemma2_side_config(oracle, side):
    fields = _t5gemma_side_config(oracle, side)
    del fields["rope_theta"]
    wavelength = oracle.rope_max_wavelength
    factor = oracle.global_rope_scaling_factor
    if side == "encoder":
        wavelength = oracle.encoder_rope_max_wavelength or wavelength
        factor = oracle.encoder_global_rope_scaling_factor or factor
    fields.update(
        model_type=f"t5gemma2_{'text' if side == 'encoder' else side}",
        use_qk_norm=oracle.use_query_key_norm,
        tie_word_embeddings=True,
        rope_parameters={
            "sliding_attention": {
                "rope_type": "default",
                "rope_theta": wavelength,
            },
            "full_attention": {
                "rope_type": "linear",
                "factor": factor,
                "rope_theta": 1_000_000.0,
            },
        },
    )
    fields.pop("is_decoder", None)
    fields.pop("cross_attention_hidden_size", None)
    return fields


def _t5gemma2_config(oracle):
    """`config.json` as transformers' T5Gemma2Config writes it, without
    the vision tower's `vision_config`."""
    config = _t5gemma_config(oracle)
    config.update(
        model_type="t5gemma2",
        architectures=["T5Gemma2ForConditionalGeneration"],
        encoder={
            "model_type": "t5gemma2_encoder",
            "text_config": _t5gemma2_side_config(oracle, "encoder"),
        },
        decoder=_t5gemma2_side_config(oracle, "decoder"),
        eoi_token_index=oracle.eoi_token_index,
    )
    return config


def _t5gemma2_tensors(oracle):
    """Named as keras-hub's `convert_t5gemma2` reads them: one token table
    (the encoder's), each decoder block's merged attention as `self_attn`."""
    tensors = {
        "model.encoder.embed_tokens.weight": oracle.token_embedding.embeddings
    }
    for side in _T5GEMMA_SIDES:
        prefix = f"model.{side}."
        tensors[prefix + "norm.weight"] = getattr(oracle, f"{side}_norm").scale
        for i, layer in enumerate(getattr(oracle, f"{side}_layers")):
            block = f"{prefix}layers.{i}."
            attention = (
                layer.self_attn if side == "encoder" else layer.merged_attn
            )
            output = attention.output_dense.kernel.numpy()
            tensors[block + "self_attn.o_proj.weight"] = output.reshape(
                -1, output.shape[-1]
            ).T
            for proj in ("query", "key", "value"):
                kernel = getattr(attention, f"{proj}_dense").kernel.numpy()
                tensors[block + f"self_attn.{proj[0]}_proj.weight"] = (
                    kernel.reshape(kernel.shape[0], -1).T
                )
            tensors[block + "self_attn.q_norm.weight"] = (
                attention.query_norm.scale
            )
            tensors[block + "self_attn.k_norm.weight"] = (
                attention.key_norm.scale
            )
            for norm in (
                "pre_self_attn",
                "post_self_attn",
                "pre_feedforward",
                "post_feedforward",
            ):
                tensors[block + f"{norm}_layernorm.weight"] = getattr(
                    layer, f"{norm}_layernorm"
                ).scale
            for name in ("gate_proj", "up_proj", "down_proj"):
                kernel = getattr(layer.mlp, name).kernel.numpy()
                tensors[block + f"mlp.{name}.weight"] = kernel.T
    return tensors


class TestT5Gemma2Checkpoints(HuggingFaceFamilyTests):
    meshes = ((2, 4),)
    cases = [
        HFCase(
            "t5gemma2_mqa_scaled_rope",
            "T5Gemma2Backbone",
            t5gemma_config(
                (32, 48, 4, 1, 8),
                (32, 48, 4, 1, 8),
                ("sliding_attention", "full_attention"),
                sliding_window=3,
                query_pre_attn_scalar=8.0,
                global_rope_scaling_factor=8.0,
                encoder_rope_max_wavelength=500.0,
            ),
            writer=tensor_writer(_t5gemma2_config, _t5gemma2_tensors),
            inputs=_t5gemma_inputs,
            outputs=_both_sides_real,
        )
    ]


def test_t5gemma2_export_refuses_tables_that_differ(tmp_path):
    """Hugging Face's T5Gemma 2 keeps one token table for both sides."""
    from keras_nlp.models import T5Gemma2Backbone
    from tests.models.tiny_configs import tiny

    _, config = tiny("T5Gemma2Backbone")
    backbone = T5Gemma2Backbone(**config)
    with pytest.raises(ValueError, match="differ: make them equal"):
        backbone.save_to_preset(str(tmp_path / "hf"), format="huggingface")
