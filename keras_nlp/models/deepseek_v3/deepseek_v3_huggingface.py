"""Hugging Face `deepseek_v3` checkpoints (deepseek-ai/DeepSeek-V3, R1,
V3.1, and V3-like configs).

MLA's tensors: `self_attn.q_a_proj`, `q_a_layernorm`, `q_b_proj` (or
`q_proj` without a query latent), `kv_a_proj_with_mqa`, `kv_a_layernorm`,
`kv_b_proj` and `o_proj`, the per-head ones split by heads as our kernels
hold them; RoPE features stay in the checkpoint's interleaved-pair order
(`rope_interleave`, which both sides rotate alike). The first
`first_k_dense_replace` blocks have `mlp.{gate,up,down}_proj`; the others
the router `mlp.gate.weight` with its `mlp.gate.e_score_correction_bias`,
per-expert `mlp.experts.{e}.*_proj` stacked along our expert axis, and
`mlp.shared_experts.*_proj`. The published checkpoints store their
linears as block-scaled FP8 (`quantization_config` "fp8", 128 x 128
blocks of `weight_scale_inv`): they are dequantized while loading, as for
every family.

The multi-token-prediction block (`num_nextn_predict_layers`, stored as
`model.layers.{num_hidden_layers}.*`) is not part of the backbone: its
tensors are skipped on import, and export writes
`num_nextn_predict_layers: 0`.
"""

from keras_nlp.models.deepseek_v3.deepseek_v3_backbone import MOE_BLOCK
from keras_nlp.models.deepseek_v3.deepseek_v3_layers import SHARED_EXPERT
from keras_nlp.models.deepseek_v3.deepseek_v3_layers import SUBLAYER_NAMES
from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_WEIGHTS
from keras_nlp.saving.huggingface import HEADS_KERNEL
from keras_nlp.saving.huggingface import HEADS_OUTPUT_KERNEL
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface.fields import check_full_rotation

_BLOCK = "transformer_layer_{i}/"
_LAYER = "model.layers.{i}."
_ATTENTION = _BLOCK + "self_attention/"
_MOE = _BLOCK + MOE_BLOCK + "/"
_SWIGLU = (
    ("feedforward_gate_dense", "gate_proj"),
    ("feedforward_intermediate_dense", "up_proj"),
    ("feedforward_output_dense", "down_proj"),
)
_EXPERTS = (
    ("expert_feedforward_gate_dense", "gate_proj"),
    ("expert_feedforward_intermediate_dense", "up_proj"),
    ("expert_feedforward_output_dense", "down_proj"),
)
# Our attention projection -> (theirs, ops ours -> theirs).
_ATTENTION_TENSORS = {
    "query": ("q_proj", HEADS_KERNEL),
    "query_a": ("q_a_proj", KERNEL),
    "query_a_norm": ("q_a_layernorm", ()),
    "query_b": ("q_b_proj", HEADS_KERNEL),
    "key_value_a": ("kv_a_proj_with_mqa", KERNEL),
    "key_value_a_norm": ("kv_a_layernorm", ()),
    "key_value_b": ("kv_b_proj", HEADS_KERNEL),
    "output": ("o_proj", HEADS_OUTPUT_KERNEL),
}


def _weights(config):
    # Embeddings, block norms, the dense blocks' SwiGLU, the final norm.
    rows = [
        row for row in LLAMA_STYLE_WEIGHTS if "self_attention/" not in row.ours
    ]
    kinds = ["key_value_a", "key_value_a_norm", "key_value_b", "output"]
    if config.get("q_lora_rank") is None:
        kinds.insert(0, "query")
    else:
        kinds[:0] = ["query_a", "query_a_norm", "query_b"]
    for kind in kinds:
        theirs, ops = _ATTENTION_TENSORS[kind]
        variable = "scale" if kind.endswith("_norm") else "kernel"
        rows.append(
            Weight(
                _ATTENTION + f"{SUBLAYER_NAMES[kind]}/{variable}",
                _LAYER + f"self_attn.{theirs}.weight",
                ops,
            )
        )
    rows += [
        Weight(
            _MOE + "sparse_feedforward_gate_dense/kernel",
            _LAYER + "mlp.gate.weight",
            KERNEL,
        ),
        Weight(
            _MOE + "e_score_correction_bias",
            _LAYER + "mlp.gate.e_score_correction_bias",
        ),
        *(
            Weight(
                _MOE + f"experts/{ours}",
                _LAYER + f"mlp.experts.{{e}}.{theirs}.weight",
                KERNEL,
                stack_axis=0,
            )
            for ours, theirs in _EXPERTS
        ),
        *(
            Weight(
                _MOE + f"{SHARED_EXPERT}/{ours}/kernel",
                _LAYER + f"mlp.shared_experts.{theirs}.weight",
                KERNEL,
            )
            for ours, theirs in _SWIGLU
        ),
    ]
    return rows


def _read_rope(hf):
    """Our RoPE arguments: plain, or DeepSeek's YaRN; from `rope_theta` and
    `rope_scaling` (transformers 4) or `rope_parameters` (5)."""
    parameters, scaling = hf.get("rope_parameters"), hf.get("rope_scaling")
    field, rope = "rope_scaling", scaling
    if parameters is not None:
        field, rope = "rope_parameters", parameters
        if scaling is not None:
            hf.unsupported(
                "rope_scaling", scaling, why=" next to rope_parameters"
            )
    if rope is not None and not isinstance(rope, dict):
        hf.unsupported(field, rope, why=" (expected an object)")
    rope = dict(rope or {})
    theta = rope.pop("rope_theta", None) or hf.get("rope_theta", 10000.0)
    check_full_rotation(hf, field, rope)
    kind = rope.pop("rope_type", None)
    kind = rope.pop("type", None) or kind or "default"
    if kind not in ("yarn", "default"):
        hf.unsupported(f"{field}.rope_type", kind, ["yarn", "default"])
    if kind == "default":
        return {"rope_max_wavelength": theta, "rope_scaling_factor": 1.0}
    names = {
        "factor": ("rope_scaling_factor", None),
        "original_max_position_embeddings": (
            "rope_original_max_position_embeddings",
            4096,
        ),
        "beta_fast": ("rope_beta_fast", 32.0),
        "beta_slow": ("rope_beta_slow", 1.0),
        "mscale": ("rope_mscale", 1.0),
        "mscale_all_dim": ("rope_mscale_all_dims", 0.0),
    }
    unknown = sorted(set(rope) - set(names))
    if unknown or rope.get("factor") is None:
        hf.unsupported(
            field,
            {**rope, "rope_type": kind},
            why=f" (keys {unknown} are not understood, or no factor)",
        )
    return {
        "rope_max_wavelength": theta,
        **{
            ours: rope.get(key, default)
            for key, (ours, default) in names.items()
        },
    }


def _from_hf(hf):
    hf.expect("hidden_act", ("silu",), default="silu")
    hf.expect("attention_bias", (False,), default=False)
    hf.expect("scoring_func", ("sigmoid",), default="sigmoid")
    hf.expect("topk_method", ("noaux_tc",), default="noaux_tc")
    hf.expect("moe_layer_freq", (1,), default=1)
    hf.expect("rope_interleave", (True,), default=True)
    heads = hf.require("num_attention_heads")
    # MLA gives every head its own key and value: the field is not read.
    hf.get("num_key_value_heads")
    hf.get("num_nextn_predict_layers")
    nope, rope = hf.require("qk_nope_head_dim"), hf.require("qk_rope_head_dim")
    # Derived sizes that transformers 5 writes too: the decoupled RoPE key's
    # (`head_dim`) and a query/key head's (`qk_head_dim`).
    hf.expect("head_dim", (rope,), default=rope)
    hf.expect("qk_head_dim", (nope + rope,), default=nope + rope)
    return {
        "vocabulary_size": hf.require("vocab_size"),
        "num_layers": hf.require("num_hidden_layers"),
        "num_query_heads": heads,
        "hidden_dim": hf.require("hidden_size"),
        "intermediate_dim": hf.require("intermediate_size"),
        "moe_intermediate_dim": hf.require("moe_intermediate_size"),
        "n_routed_experts": hf.require("n_routed_experts"),
        "n_shared_experts": hf.get("n_shared_experts", 1),
        "num_experts_per_tok": hf.require("num_experts_per_tok"),
        "n_group": hf.get("n_group", 1),
        "topk_group": hf.get("topk_group", 1),
        "routed_scaling_factor": hf.get("routed_scaling_factor", 1.0),
        "norm_topk_prob": hf.get("norm_topk_prob", True),
        "first_k_dense_replace": hf.get("first_k_dense_replace", 0),
        "q_lora_rank": hf.get("q_lora_rank"),
        "kv_lora_rank": hf.require("kv_lora_rank"),
        "qk_nope_head_dim": nope,
        "qk_rope_head_dim": rope,
        "v_head_dim": hf.require("v_head_dim"),
        **_read_rope(hf),
        "layer_norm_epsilon": hf.get("rms_norm_eps", 1e-6),
        "tie_word_embeddings": hf.get("tie_word_embeddings", False),
        "dropout": hf.get("attention_dropout", 0.0),
    }


def _to_hf(config):
    fields = {
        "vocab_size": config["vocabulary_size"],
        "num_hidden_layers": config["num_layers"],
        "num_attention_heads": config["num_query_heads"],
        "num_key_value_heads": config["num_query_heads"],
        "hidden_size": config["hidden_dim"],
        "intermediate_size": config["intermediate_dim"],
        "moe_intermediate_size": config["moe_intermediate_dim"],
        "n_routed_experts": config["n_routed_experts"],
        "n_shared_experts": config["n_shared_experts"],
        "num_experts_per_tok": config["num_experts_per_tok"],
        "n_group": config["n_group"],
        "topk_group": config["topk_group"],
        "routed_scaling_factor": config["routed_scaling_factor"],
        "norm_topk_prob": config["norm_topk_prob"],
        "first_k_dense_replace": config["first_k_dense_replace"],
        "q_lora_rank": config["q_lora_rank"],
        "kv_lora_rank": config["kv_lora_rank"],
        "qk_nope_head_dim": config["qk_nope_head_dim"],
        "qk_rope_head_dim": config["qk_rope_head_dim"],
        "head_dim": config["qk_rope_head_dim"],
        "qk_head_dim": config["qk_nope_head_dim"] + config["qk_rope_head_dim"],
        "v_head_dim": config["v_head_dim"],
        "rope_theta": config["rope_max_wavelength"],
        "rope_interleave": True,
        "rms_norm_eps": config["layer_norm_epsilon"],
        "tie_word_embeddings": config["tie_word_embeddings"],
        "hidden_act": "silu",
        "attention_bias": False,
        "attention_dropout": config["dropout"],
        "scoring_func": "sigmoid",
        "topk_method": "noaux_tc",
        "num_nextn_predict_layers": 0,
    }
    if config["rope_scaling_factor"] != 1:
        fields["rope_scaling"] = {
            "type": "yarn",
            "rope_type": "yarn",
            "factor": config["rope_scaling_factor"],
            "original_max_position_embeddings": config[
                "rope_original_max_position_embeddings"
            ],
            "beta_fast": config["rope_beta_fast"],
            "beta_slow": config["rope_beta_slow"],
            "mscale": config["rope_mscale"],
            "mscale_all_dim": config["rope_mscale_all_dims"],
        }
    return fields


def _beyond_the_blocks(config):
    """The multi-token-prediction block's tensors: any layer index past
    our `num_layers` blocks."""
    ours = "|".join(str(i) for i in range(config["num_layers"]))
    return (rf"model\.layers\.(?!(?:{ours})\.)\d+\..+",)


DEEPSEEK_V3 = register_family(
    HuggingFaceFamily(
        model_type="deepseek_v3",
        backbone="DeepSeekV3Backbone",
        architectures=("DeepseekV3ForCausalLM",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=_weights,
        ignored_fields=(
            # Only bounds positions; RoPE tables are computed for any length.
            "max_position_embeddings",
            "pretraining_tp",
            # Training-time and parallelism settings of the reference code.
            "aux_loss_alpha",
            "seq_aux",
            "ep_size",
            "output_router_logits",
            "router_aux_loss_coef",
        ),
        ignorable_tensors=(
            r"model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq",
        ),
        ignorable_for_config=_beyond_the_blocks,
    )
)
