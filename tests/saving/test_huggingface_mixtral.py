"""Hugging Face `mixtral` checkpoints against keras-hub's loader.

keras-hub has no Mixtral exporter: the checkpoint is written from the
keras-hub backbone under the names its `convert_mixtral` reads.
"""

from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import tensor_writer
from tests.saving.huggingface_moe_writers import llama_style_tensors
from tests.saving.huggingface_moe_writers import numpy


def _config(oracle):
    return {
        "model_type": "mixtral",
        "architectures": ["MixtralForCausalLM"],
        "vocab_size": oracle.vocabulary_size,
        "num_hidden_layers": oracle.num_layers,
        "num_attention_heads": oracle.num_query_heads,
        "num_key_value_heads": oracle.num_key_value_heads,
        "hidden_size": oracle.hidden_dim,
        "intermediate_size": oracle.intermediate_dim,
        "num_local_experts": oracle.num_experts,
        "num_experts_per_tok": oracle.top_k,
        "rms_norm_eps": oracle.layer_norm_epsilon,
        "rope_theta": oracle.rope_max_wavelength,
        "sliding_window": oracle.sliding_window,
        "router_jitter_noise": 0.0,
        "router_aux_loss_coef": 0.02,
        "output_router_logits": False,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }


def _tensors(oracle):
    tensors = llama_style_tensors(oracle)
    for i, layer in enumerate(oracle.transformer_layers):
        moe = layer._sparse_moe_block
        prefix = f"model.layers.{i}.block_sparse_moe."
        tensors[prefix + "gate.weight"] = numpy(
            moe._sparse_feedforward_gate_dense.kernel
        ).T
        bank = moe.expert_bank
        for theirs, kernel in (
            ("w1", bank._expert_feedforward_gate_dense),
            ("w3", bank._expert_feedforward_intermediate_dense),
            ("w2", bank._expert_feedforward_output_dense),
        ):
            for e, value in enumerate(numpy(kernel)):
                tensors[f"{prefix}experts.{e}.{theirs}.weight"] = value.T
    return tensors


class TestMixtralCheckpoints(HuggingFaceFamilyTests):
    # (2, 4) runs for Qwen MoE only (suite time).
    meshes = ((1, 8),)
    cases = [
        HFCase(
            "mixtral_window",
            "MixtralBackbone",
            dict(
                vocabulary_size=96,
                num_layers=2,
                num_query_heads=8,
                num_key_value_heads=2,
                hidden_dim=32,
                intermediate_dim=24,
                num_experts=4,
                top_k=2,
                sliding_window=4,
            ),
            writer=tensor_writer(_config, _tensors),
        )
    ]
