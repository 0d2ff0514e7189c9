"""Hugging Face Qwen 3.5 checkpoints against keras-hub.

See `tests/saving/huggingface_checkpoints.py`. keras-hub's exporter writes
a `qwen3_5` checkpoint (the text config nested, tensors under
`model.language_model.`) of a tiny backbone with every option its format
has: linear attention blocks (4 value heads reading 2 key heads, a
convolution of 3) around a full attention block (4:2 heads, half of each
head rotated), an untied output projection. keras-hub has no exporter
for Qwen 3.5 MoE: its checkpoint is written under the names keras-hub's
converter reads.
"""

import numpy as np

from tests.models.tiny_configs import QWEN3_5_MOE_OPTIONS
from tests.models.tiny_configs import qwen3_5_config
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import tensor_writer


def _config(**options):
    """Three blocks (linear, full, linear), no window (the format has
    none), a wavelength of 10000."""
    return qwen3_5_config(
        vocabulary_size=96,
        hidden_dim=32,
        num_layers=3,
        layer_types=["linear_attention", "full_attention", "linear_attention"],
        sliding_window_size=None,
        rope_max_wavelength=10000,
        **options,
    )


def _moe_backbone_config():
    return _config(**QWEN3_5_MOE_OPTIONS)


class TestQwen3_5Checkpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "qwen3_5_every_option",
            "Qwen3_5Backbone",
            _config(intermediate_dim=48),
        )
    ]
    meshes = ((2, 4),)


def _moe_config(oracle):
    """A `qwen3_5_moe` config.json of keras-hub's backbone, with the
    fields keras-hub's converter reads (it has no exporter for it)."""
    return {
        "model_type": "qwen3_5_moe",
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "tie_word_embeddings": oracle.tie_word_embeddings,
        "text_config": {
            "model_type": "qwen3_5_moe_text",
            "vocab_size": oracle.vocabulary_size,
            "hidden_size": oracle.hidden_dim,
            "num_hidden_layers": oracle.num_layers,
            "num_attention_heads": oracle.num_query_heads,
            "num_key_value_heads": oracle.num_key_value_heads,
            "head_dim": oracle.head_dim,
            "moe_intermediate_size": oracle.moe_intermediate_dim,
            "shared_expert_intermediate_size": (
                oracle.shared_expert_intermediate_size
            ),
            "num_experts": oracle.num_experts,
            "num_experts_per_tok": oracle.top_k,
            "rms_norm_eps": oracle.layer_norm_epsilon,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": oracle.rope_max_wavelength,
                "partial_rotary_factor": oracle.partial_rotary_factor,
            },
            "layer_types": oracle.layer_types,
            "linear_num_key_heads": oracle.linear_num_key_heads,
            "linear_num_value_heads": oracle.linear_num_value_heads,
            "linear_key_head_dim": oracle.linear_key_head_dim,
            "linear_value_head_dim": oracle.linear_value_head_dim,
            "linear_conv_kernel_dim": oracle.linear_conv_kernel_dim,
            "router_aux_loss_coef": oracle.router_aux_loss_coefficient,
            "hidden_act": "silu",
            "max_position_embeddings": 262144,
        },
    }


def _moe_tensors(oracle):
    """keras-hub's weights under the names its converter reads (the
    experts fused, transformers 5's layout)."""
    prefix = "model.language_model."
    tensors = {
        prefix + "embed_tokens.weight": oracle.token_embedding.embeddings,
        prefix + "norm.weight": oracle.layer_norm.scale,
    }
    if not oracle.tie_word_embeddings:
        tensors["lm_head.weight"] = np.transpose(
            oracle.token_embedding.reverse_embeddings
        )
    for i, layer in enumerate(oracle.transformer_layers):
        name = f"{prefix}layers.{i}."
        tensors[name + "input_layernorm.weight"] = layer._input_layernorm.scale
        tensors[name + "post_attention_layernorm.weight"] = (
            layer._post_attention_layernorm.scale
        )
        if layer.layer_type == "full_attention":
            attention = layer._self_attention_layer
            for theirs, dense in (
                ("q_proj", attention._query_dense),
                ("k_proj", attention._key_dense),
                ("v_proj", attention._value_dense),
            ):
                kernel = np.asarray(dense.kernel)
                tensors[name + f"self_attn.{theirs}.weight"] = np.transpose(
                    kernel.reshape(kernel.shape[0], -1)
                )
            output = np.asarray(attention._output_dense.kernel)
            tensors[name + "self_attn.o_proj.weight"] = np.transpose(
                output.reshape(-1, output.shape[-1])
            )
            tensors[name + "self_attn.q_norm.weight"] = (
                attention._query_norm.scale
            )
            tensors[name + "self_attn.k_norm.weight"] = (
                attention._key_norm.scale
            )
        else:
            linear = layer._linear_attn
            for theirs in (
                "in_proj_qkv",
                "in_proj_z",
                "in_proj_b",
                "in_proj_a",
            ):
                tensors[name + f"linear_attn.{theirs}.weight"] = np.transpose(
                    getattr(linear, theirs).kernel
                )
            tensors[name + "linear_attn.out_proj.weight"] = np.transpose(
                linear.out_proj.kernel
            )
            tensors[name + "linear_attn.conv1d.weight"] = np.asarray(
                linear.conv1d_weight
            )[:, None, :]
            tensors[name + "linear_attn.dt_bias"] = linear.dt_bias
            tensors[name + "linear_attn.A_log"] = linear.A_log
            tensors[name + "linear_attn.norm.weight"] = linear.norm.scale
        moe = layer.mlp
        tensors[name + "mlp.gate.weight"] = np.transpose(
            moe._router_gate.kernel
        )
        bank = moe.expert_bank
        tensors[name + "mlp.experts.gate_up_proj"] = np.transpose(
            bank._expert_feedforward_gate_dense, (0, 2, 1)
        )
        tensors[name + "mlp.experts.down_proj"] = np.transpose(
            bank._expert_feedforward_output_dense, (0, 2, 1)
        )
        shared = moe.shared_expert
        for ours, theirs in (
            ("_feedforward_gate_dense", "gate_proj"),
            ("_feedforward_intermediate_dense", "up_proj"),
            ("_feedforward_output_dense", "down_proj"),
        ):
            tensors[name + f"mlp.shared_expert.{theirs}.weight"] = np.transpose(
                getattr(shared, ours).kernel
            )
        tensors[name + "mlp.shared_expert_gate.weight"] = np.transpose(
            moe._shared_expert_gate.kernel
        )
    return {k: np.asarray(v) for k, v in tensors.items()}


def _moe_tensors_per_expert(oracle):
    """`_moe_tensors` with one tensor per expert and projection, as many
    published checkpoints store them (keras-hub's converter reads both)."""
    tensors = {}
    for name, value in _moe_tensors(oracle).items():
        if name.endswith("mlp.experts.gate_up_proj"):
            prefix, width = name[: -len("gate_up_proj")], value.shape[1] // 2
            for expert, fused in enumerate(value):
                tensors[f"{prefix}{expert}.gate_proj.weight"] = fused[:width]
                tensors[f"{prefix}{expert}.up_proj.weight"] = fused[width:]
        elif name.endswith("mlp.experts.down_proj"):
            prefix = name[: -len("down_proj")]
            for expert, down in enumerate(value):
                tensors[f"{prefix}{expert}.down_proj.weight"] = down
        else:
            tensors[name] = value
    return tensors


class TestQwen3_5MoeCheckpoints(HuggingFaceFamilyTests):
    # keras-hub has no exporter for it: its converter's names, written
    # here (4 experts, 2 per token, beside the shared expert), with the
    # experts fused (transformers 5's layout) or one tensor per expert.
    cases = [
        HFCase(
            "qwen3_5_moe_experts",
            "Qwen3_5MoeBackbone",
            _moe_backbone_config(),
            writer=tensor_writer(_moe_config, _moe_tensors),
        ),
        HFCase(
            "qwen3_5_moe_per_expert",
            "Qwen3_5MoeBackbone",
            _moe_backbone_config(),
            writer=tensor_writer(_moe_config, _moe_tensors_per_expert),
        ),
    ]
    meshes = ((2, 4),)
