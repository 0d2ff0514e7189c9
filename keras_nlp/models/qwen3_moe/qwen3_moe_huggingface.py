"""Hugging Face `qwen3_moe` checkpoints (Qwen 3 30B-A3B, 235B-A22B, ...).

Qwen 3's attention (query/key norms, no biases, free `head_dim`) with a
mixture of experts in the sparse blocks: a router `mlp.gate` and
per-expert `gate_proj`/`up_proj`/`down_proj`, the gate and up halves of
our fused expert kernel filled from their tensors (`ours_part`). Blocks
left dense by `decoder_sparse_step` or `mlp_only_layers` have
`mlp.*_proj`.

The query/key norms of `Qwen3MoeBackbone` use epsilon `1e-6` (keras-hub's
choice) where `transformers` uses `rms_norm_eps`, which is `1e-6` in the
released configs; for another value the difference is a few ulps of
float32 for weights of usual scale.

The expert count is `num_experts` (transformers 4) or `num_local_experts`
(transformers 5); export writes `num_experts`, which both read.

`output_router_logits` is not read: it only decides whether Hugging
Face's forward returns the router logits (and the load-balancing loss).
"""

from keras_nlp.models.gpt_neo_x.gpt_neo_x_huggingface import one_of
from keras_nlp.models.llama.llama_huggingface import register_llama_style
from keras_nlp.models.qwen3.qwen3_huggingface import QWEN3_WEIGHTS
from keras_nlp.models.qwen3.qwen3_huggingface import read_qwen3
from keras_nlp.models.qwen3.qwen3_huggingface import write_qwen3
from keras_nlp.models.qwen3_moe.qwen3_moe_backbone import DENSE_BLOCK
from keras_nlp.models.qwen3_moe.qwen3_moe_backbone import MOE_BLOCK
from keras_nlp.models.qwen_moe.qwen_moe_huggingface import dense_block_weights
from keras_nlp.models.qwen_moe.qwen_moe_huggingface import expert_weights
from keras_nlp.models.qwen_moe.qwen_moe_huggingface import read_sparsity
from keras_nlp.models.qwen_moe.qwen_moe_huggingface import write_sparsity


def _weights(config):
    return [
        # Attention (with query/key norms), block norms and embeddings;
        # its dense feed-forward rows match nothing here.
        *QWEN3_WEIGHTS,
        *expert_weights(MOE_BLOCK, config["moe_intermediate_dim"]),
        *dense_block_weights(DENSE_BLOCK),
    ]


def _from_hf(hf):
    # Qwen 3's fields, with Hugging Face's Qwen3MoeConfig defaults for the
    # experts.
    config = read_qwen3(hf)
    # transformers 5 names the expert count `num_local_experts`.
    config["num_experts"] = one_of(
        hf, ("num_experts", "num_local_experts"), 128
    )
    config["moe_intermediate_dim"] = hf.get("moe_intermediate_size", 768)
    config.update(read_sparsity(hf))
    return config


def _to_hf(config):
    return {**write_qwen3(config), **write_sparsity(config)}


QWEN3_MOE = register_llama_style(
    "qwen3_moe", "Qwen3MoeBackbone", _from_hf, _to_hf, _weights, moe=True
)
