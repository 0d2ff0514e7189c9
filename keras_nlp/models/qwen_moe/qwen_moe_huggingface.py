"""Hugging Face `qwen2_moe` checkpoints (Qwen 1.5 MoE, Qwen 2 MoE).

Qwen 2's attention (biases on query, key and value) with a mixture of
experts in the sparse blocks: a router `mlp.gate`, per-expert
`gate_proj`/`up_proj`/`down_proj`, and a shared expert scaled by the
sigmoid of `mlp.shared_expert_gate`. Our experts hold the gate and up
projections in one `(experts, hidden, 2 * moe_intermediate_dim)` kernel,
the gate half first: each half is filled from the per-expert tensors
(`ours_part`), stacked along the expert axis. Blocks left dense by
`decoder_sparse_step` or `mlp_only_layers` have Qwen 2's `mlp.*_proj`.

`output_router_logits` is not read: it decides whether Hugging Face's
forward returns the router logits (and adds the load-balancing loss), not
any hidden state; ours adds that loss in training, weighted by
`router_aux_loss_coefficient`.
"""

from keras_nlp.models.llama.llama_huggingface import register_llama_style
from keras_nlp.models.qwen.qwen_huggingface import QWEN_WEIGHTS
from keras_nlp.models.qwen.qwen_huggingface import read_qwen2
from keras_nlp.models.qwen.qwen_huggingface import write_qwen2
from keras_nlp.models.qwen_moe.qwen_moe_backbone import DENSE_BLOCK
from keras_nlp.models.qwen_moe.qwen_moe_backbone import MOE_BLOCK
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import Weight

_LAYER = "model.layers.{i}."
_SWIGLU = (
    ("feedforward_gate_dense", "gate_proj"),
    ("feedforward_intermediate_dense", "up_proj"),
    ("feedforward_output_dense", "down_proj"),
)


def dense_block_weights(block):
    """The rows of a dense SwiGLU named `block` (a `GatedFeedForward`) in a
    mixed decoder: Hugging Face's `mlp.{gate,up,down}_proj`."""
    return [
        Weight(
            f"transformer_layer_{{i}}/{block}/{ours}/kernel",
            _LAYER + f"mlp.{theirs}.weight",
            KERNEL,
        )
        for ours, theirs in _SWIGLU
    ]


def expert_weights(block, width):
    """The rows of a `SparseMoE` named `block` whose experts fuse gate and
    up (`fused_gate_intermediate=True`, gate first) of `width` each: the
    router `mlp.gate` and the per-expert `mlp.experts.{e}.*_proj`."""
    prefix = f"transformer_layer_{{i}}/{block}/"
    fused = prefix + "experts/expert_feedforward_gate_dense"
    experts = _LAYER + "mlp.experts.{e}."
    return [
        Weight(
            prefix + "sparse_feedforward_gate_dense/kernel",
            _LAYER + "mlp.gate.weight",
            KERNEL,
        ),
        Weight(
            fused,
            experts + "gate_proj.weight",
            KERNEL,
            stack_axis=0,
            ours_part=(2, 0, width),
        ),
        Weight(
            fused,
            experts + "up_proj.weight",
            KERNEL,
            stack_axis=0,
            ours_part=(2, width, 2 * width),
        ),
        Weight(
            prefix + "experts/expert_feedforward_output_dense",
            experts + "down_proj.weight",
            KERNEL,
            stack_axis=0,
        ),
    ]


def _weights(config):
    shared = f"transformer_layer_{{i}}/{MOE_BLOCK}/"
    return [
        # Attention (with biases), norms and embeddings; its dense
        # feed-forward rows match nothing here.
        *QWEN_WEIGHTS,
        *expert_weights(MOE_BLOCK, config["moe_intermediate_dim"]),
        *(
            Weight(
                shared + f"shared_expert_dense/{ours}/kernel",
                _LAYER + f"mlp.shared_expert.{theirs}.weight",
                KERNEL,
            )
            for ours, theirs in _SWIGLU
        ),
        Weight(
            shared + "shared_expert_gate_dense/kernel",
            _LAYER + "mlp.shared_expert_gate.weight",
            KERNEL,
        ),
        *dense_block_weights(DENSE_BLOCK),
    ]


def read_sparsity(hf):
    """The mixture-of-experts arguments both Qwen MoE families share, with
    Hugging Face's defaults (Qwen2MoeConfig's and Qwen3MoeConfig's)."""
    return {
        "top_k": hf.get("num_experts_per_tok", 4),
        "norm_top_k_prob": hf.get("norm_topk_prob", False),
        "decoder_sparse_step": hf.get("decoder_sparse_step", 1),
        "mlp_only_layers": list(hf.get("mlp_only_layers", [])),
        "router_aux_loss_coefficient": hf.get("router_aux_loss_coef", 0.001),
    }


def write_sparsity(config):
    """`config.json` fields of the arguments `read_sparsity` reads."""
    return {
        "num_experts": config["num_experts"],
        "moe_intermediate_size": config["moe_intermediate_dim"],
        "num_experts_per_tok": config["top_k"],
        "norm_topk_prob": config["norm_top_k_prob"],
        "decoder_sparse_step": config["decoder_sparse_step"],
        "mlp_only_layers": list(config["mlp_only_layers"] or []),
        "router_aux_loss_coef": config["router_aux_loss_coefficient"],
        "output_router_logits": False,
    }


def _from_hf(hf):
    # Newer configs spell out the attention biases Qwen 2 MoE always has.
    hf.expect("qkv_bias", (True,), default=True)
    config = read_qwen2(hf)
    # Hugging Face's Qwen2MoeConfig defaults.
    config["num_experts"] = hf.get("num_experts", 60)
    config["moe_intermediate_dim"] = hf.get("moe_intermediate_size", 1408)
    config["shared_expert_intermediate_dim"] = hf.get(
        "shared_expert_intermediate_size", 5632
    )
    config.update(read_sparsity(hf))
    return config


def _to_hf(config):
    return {
        **write_qwen2(config),
        **write_sparsity(config),
        "shared_expert_intermediate_size": config[
            "shared_expert_intermediate_dim"
        ],
        "max_position_embeddings": 8192,
    }


QWEN2_MOE = register_llama_style(
    "qwen2_moe", "QwenMoeBackbone", _from_hf, _to_hf, _weights, moe=True
)
