"""Hugging Face `mixtral` checkpoints (Mixtral 8x7B, 8x22B).

Mistral's tensors, with each feed-forward a `block_sparse_moe`: a router
`gate` and one `w1` (gate), `w3` (up) and `w2` (down) projection per
expert, which our backbone stacks along its expert axis.

`output_router_logits` is not read: it only decides whether Hugging
Face's forward returns the router logits (and adds the load-balancing
loss), which changes no hidden state; ours adds that loss in training,
weighted by `router_aux_loss_coef`.
"""

from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_WEIGHTS
from keras_nlp.models.llama.llama_huggingface import check_head_dim
from keras_nlp.models.llama.llama_huggingface import read_llama_style
from keras_nlp.models.llama.llama_huggingface import register_llama_style
from keras_nlp.models.llama.llama_huggingface import write_llama_style
from keras_nlp.models.mixtral.mixtral_backbone import MOE_BLOCK
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface.fields import read_linear_rope
from keras_nlp.saving.huggingface.fields import read_window
from keras_nlp.saving.huggingface.fields import write_linear_rope

_MOE = "transformer_layer_{i}/" + MOE_BLOCK + "/"
_THEIR_MOE = "model.layers.{i}.block_sparse_moe."

MIXTRAL_WEIGHTS = [
    # The attention, norms and embeddings of the Llama-style table (its
    # dense feed-forward rows match nothing here).
    *LLAMA_STYLE_WEIGHTS,
    Weight(
        _MOE + "sparse_feedforward_gate_dense/kernel",
        _THEIR_MOE + "gate.weight",
        KERNEL,
    ),
    *(
        Weight(
            _MOE + f"experts/expert_feedforward_{ours}",
            _THEIR_MOE + "experts.{e}." + theirs + ".weight",
            KERNEL,
            stack_axis=0,
        )
        for ours, theirs in (
            ("gate_dense", "w1"),
            ("intermediate_dense", "w3"),
            ("output_dense", "w2"),
        )
    ),
]


def _from_hf(hf):
    config = read_llama_style(hf)
    hf.expect("attention_bias", (False,), default=False)
    # MixtralBackbone has no tied output embedding.
    hf.expect("tie_word_embeddings", (False,), default=False)
    check_head_dim(hf, config)
    config.update(read_linear_rope(hf))
    # Hugging Face's MixtralConfig defaults.
    config["num_experts"] = hf.get("num_local_experts", 8)
    config["top_k"] = hf.get("num_experts_per_tok", 2)
    config["router_jitter_noise"] = hf.get("router_jitter_noise", 0.0)
    config["router_aux_loss_coef"] = hf.get("router_aux_loss_coef", 0.001)
    config["sliding_window"] = read_window(
        hf, config["num_layers"], layered=False
    )
    return config


def _to_hf(config):
    return {
        **write_llama_style(config),
        **write_linear_rope(config),
        "head_dim": config["hidden_dim"] // config["num_query_heads"],
        "num_local_experts": config["num_experts"],
        "num_experts_per_tok": config["top_k"],
        "router_jitter_noise": config["router_jitter_noise"],
        "router_aux_loss_coef": config["router_aux_loss_coef"],
        "output_router_logits": False,
        "sliding_window": config["sliding_window"],
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
    }


MIXTRAL = register_llama_style(
    "mixtral", "MixtralBackbone", _from_hf, _to_hf, MIXTRAL_WEIGHTS, moe=True
)
