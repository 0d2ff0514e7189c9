"""Hugging Face `gpt_oss` checkpoints, unquantized (e.g. saved in bfloat16).

The tensors are Llama's attention with biases on all four projections and
per-head `self_attn.sinks`, a router `mlp.router` with a bias, and the
experts as four stacked tensors: `mlp.experts.gate_up_proj`
`(experts, hidden, 2 * intermediate)` (gate in the even columns, up in the
odd ones, as ours), `gate_up_proj_bias`, `down_proj`
`(experts, intermediate, hidden)` and `down_proj_bias`: the same layouts as
our variables.

What does not load, with an error naming the field:

- MXFP4-quantized checkpoints (`quantization_config`, the experts as
  `*_blocks` and `*_scales`): OpenAI's released `gpt-oss-20b` and
  `gpt-oss-120b` are stored so. Dequantize them first (`transformers`
  loads them with `Mxfp4Config(dequantize=True)` and `save_pretrained`
  writes this layout).
- A sliding-window pattern other than our backbone's. `GptOssBackbone`
  windows the odd blocks (1, 3, ...), following keras-hub; Hugging Face's
  `layer_types` says which blocks are windowed, and OpenAI's checkpoints
  (like `GptOssConfig`'s default) window the even ones (0, 2, ...) as
  OpenAI's reference code does. Loading those into our pattern would give
  wrong numbers, so they are refused; so is a config without `layer_types`
  whose window `GptOssConfig` would put on the even blocks.
- YaRN parameters other than GPT-OSS's (`beta_fast=32`, `beta_slow=1`,
  `original_max_position_embeddings=4096`, `truncate=false`, the default
  attention factor), and `swiglu_limit` other than 7.

Hugging Face's `sliding_window` counts the query itself (a query sees the
`sliding_window - 1` tokens before it, as in OpenAI's reference code); our
backbone's (keras-hub's) counts the tokens before it, so ours is theirs
minus one. keras-hub's own loader passes the value through unchanged,
which widens the window by one token.

`router_aux_loss_coef` and `output_router_logits` only matter to Hugging
Face's training loss and outputs (our backbone adds no load-balancing
loss); `initial_context_length` is OpenAI's name for YaRN's
`original_max_position_embeddings`, which `transformers` does not read.
"""

import math

from keras_nlp.models.gpt_oss.gpt_oss_backbone import EXPERT_CLAMP_LIMIT
from keras_nlp.models.gpt_oss.gpt_oss_backbone import MOE_BLOCK
from keras_nlp.models.gpt_oss.gpt_oss_backbone import YARN_OPTIONS
from keras_nlp.models.gpt_oss.gpt_oss_backbone import is_sliding_window_layer
from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_IGNORABLE
from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_IGNORED_FIELDS
from keras_nlp.models.llama.llama_huggingface import read_llama_style
from keras_nlp.models.llama.llama_huggingface import write_llama_style
from keras_nlp.saving.huggingface import HEADS_BIAS
from keras_nlp.saving.huggingface import HEADS_KERNEL
from keras_nlp.saving.huggingface import HEADS_OUTPUT_KERNEL
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import register_family

_BLOCK = "transformer_layer_{i}/"
_ATTENTION = _BLOCK + "self_attention/"
_MOE = _BLOCK + MOE_BLOCK + "/"
_LAYER = "model.layers.{i}."

GPT_OSS_WEIGHTS = [
    Weight("token_embedding/embeddings", "model.embed_tokens.weight"),
    Weight("token_embedding/reverse_embeddings", "lm_head.weight", KERNEL),
    Weight("sequence_output_layernorm/scale", "model.norm.weight"),
    *(
        Weight(_BLOCK + f"{name}/scale", _LAYER + f"{name}.weight")
        for name in ("input_layernorm", "post_attention_layernorm")
    ),
    *(
        row
        for ours, theirs in (("query", "q"), ("key", "k"), ("value", "v"))
        for row in (
            Weight(
                _ATTENTION + f"{ours}/kernel",
                _LAYER + f"self_attn.{theirs}_proj.weight",
                HEADS_KERNEL,
            ),
            Weight(
                _ATTENTION + f"{ours}/bias",
                _LAYER + f"self_attn.{theirs}_proj.bias",
                HEADS_BIAS,
            ),
        )
    ),
    Weight(
        _ATTENTION + "attention_output/kernel",
        _LAYER + "self_attn.o_proj.weight",
        HEADS_OUTPUT_KERNEL,
    ),
    Weight(
        _ATTENTION + "attention_output/bias", _LAYER + "self_attn.o_proj.bias"
    ),
    Weight(_ATTENTION + "sinks", _LAYER + "self_attn.sinks"),
    Weight(
        _MOE + "router/router_dense/kernel",
        _LAYER + "mlp.router.weight",
        KERNEL,
    ),
    Weight(_MOE + "router/router_dense/bias", _LAYER + "mlp.router.bias"),
    *(
        Weight(_MOE + f"experts/{name}", _LAYER + f"mlp.experts.{name}")
        for name in (
            "gate_up_proj",
            "gate_up_proj_bias",
            "down_proj",
            "down_proj_bias",
        )
    ),
]
"""The tensor table: our variables have Hugging Face's expert layouts."""

# The YaRN keys `transformers` reads, with the values GPT-OSS's backbone
# is built with (absent keys take `transformers`' defaults, also listed).
_YARN = {
    "beta_fast": (YARN_OPTIONS["beta_fast"], 32.0),
    "beta_slow": (YARN_OPTIONS["beta_slow"], 1.0),
    "truncate": (YARN_OPTIONS["truncate"], True),
    "original_max_position_embeddings": (
        YARN_OPTIONS["original_max_position_embeddings"],
        None,
    ),
}


def _read_rope(hf):
    """`(theta, YaRN factor)` from `rope_theta`/`rope_scaling` (v4) or
    `rope_parameters` (v5); unscaled RoPE is factor 1."""
    parameters = hf.get("rope_parameters")
    scaling = hf.get("rope_scaling")
    field, rope = "rope_scaling", scaling
    if parameters is not None:
        if scaling is not None:
            hf.unsupported(
                "rope_scaling",
                scaling,
                why=" next to rope_parameters (which one holds?)",
            )
        field, rope = "rope_parameters", parameters
    if rope is not None and not isinstance(rope, dict):
        hf.unsupported(field, rope, why=" (expected an object)")
    rope = dict(rope or {})
    theta = rope.pop("rope_theta", None)
    if theta is None:
        theta = hf.get("rope_theta", 150000.0)
    kind = rope.pop("rope_type", None) or rope.pop("type", None) or "default"
    rope.pop("type", None)
    if kind == "default" and not rope:
        return theta, 1.0
    if kind != "yarn":
        hf.unsupported(f"{field}.rope_type", kind, ("default", "yarn"))
    factor = rope.pop("factor", None)
    if not isinstance(factor, (int, float)) or factor < 1:
        hf.unsupported(f"{field}.factor", factor, why=" (YaRN needs >= 1)")
    for key, (ours, default) in _YARN.items():
        value = rope.pop(key, default)
        if value is None:
            # `transformers` falls back to `max_position_embeddings`.
            value = hf.get("max_position_embeddings")
        if value != ours:
            hf.unsupported(f"{field}.{key}", value, (ours,))
    attention_factor = rope.pop("attention_factor", None)
    implied = 0.1 * math.log(factor) + 1.0
    if attention_factor is not None and not math.isclose(
        attention_factor, implied, rel_tol=1e-6
    ):
        hf.unsupported(
            f"{field}.attention_factor",
            attention_factor,
            [implied],
            why=" (GPT-OSS's YaRN uses 0.1 * ln(factor) + 1)",
        )
    if rope:
        hf.unsupported(
            field,
            {**rope, "rope_type": kind},
            why=f" (keys {sorted(rope)} are not understood for YaRN)",
        )
    return theta, factor


def _read_window(hf, num_layers):
    """Our `sliding_window` from `sliding_window` and `layer_types`."""
    window = hf.get("sliding_window")
    types = hf.get("layer_types")
    if types is None:
        # `GptOssConfig` then windows the even blocks, when it has a window.
        types = [
            "sliding_attention" if i % 2 == 0 else "full_attention"
            for i in range(num_layers)
        ]
        if window is None:
            types = ["full_attention"] * num_layers
        described = f"absent (with sliding_window={window})"
    else:
        described = types
    if len(types) != num_layers or not set(types) <= {
        "sliding_attention",
        "full_attention",
    }:
        hf.unsupported(
            "layer_types",
            types,
            why=f" (expected {num_layers} of 'sliding_attention' or "
            "'full_attention')",
        )
    windowed = [t == "sliding_attention" for t in types]
    if not any(windowed):
        return None
    ours = [is_sliding_window_layer(i) for i in range(num_layers)]
    if windowed != ours:
        pattern = ["sliding" if w else "full" for w in windowed]
        hf.unsupported(
            "layer_types",
            described,
            why=(
                f" (windowed blocks {pattern}; GptOssBackbone, like "
                "keras-hub's, windows the odd blocks 1, 3, ... only, so "
                "these weights would compute different numbers)"
            ),
        )
    if not isinstance(window, int) or window < 1:
        hf.unsupported("sliding_window", window, why=" (need >= 1 tokens)")
    # Theirs counts the query; ours the tokens before it.
    return window - 1


def _from_hf(hf):
    quantization = hf.get("quantization_config")
    if quantization is not None:
        hf.unsupported(
            "quantization_config",
            quantization,
            why=(
                " (quantized experts: dequantize the checkpoint, e.g. load "
                "it in transformers with Mxfp4Config(dequantize=True) and "
                "save_pretrained it)"
            ),
        )
    config = read_llama_style(hf)
    hf.expect("attention_bias", (True,), default=True)
    hf.expect("tie_word_embeddings", (False,), default=False)
    hf.expect("swiglu_limit", (EXPERT_CLAMP_LIMIT,), default=EXPERT_CLAMP_LIMIT)
    theta, factor = _read_rope(hf)
    config["rope_max_wavelength"] = theta
    config["rope_scaling_factor"] = factor
    # Hugging Face's GptOssConfig defaults.
    config["head_dim"] = hf.get("head_dim", 64)
    config["num_experts"] = hf.get("num_local_experts", 128)
    config["top_k"] = hf.get("num_experts_per_tok", 4)
    alias = hf.get("experts_per_token")
    if alias is not None and alias != config["top_k"]:
        hf.unsupported(
            "experts_per_token",
            alias,
            [config["top_k"]],
            why=" (it disagrees with num_experts_per_tok)",
        )
    config["sliding_window"] = _read_window(hf, config["num_layers"])
    return config


def _to_hf(config):
    window = config["sliding_window"]
    factor = config["rope_scaling_factor"]
    layers = config["num_layers"]
    head_dim = config["head_dim"]
    fields = {
        **write_llama_style(config),
        "rope_theta": config["rope_max_wavelength"],
        "head_dim": (
            config["hidden_dim"] // config["num_query_heads"]
            if head_dim is None
            else head_dim
        ),
        "attention_bias": True,
        "num_local_experts": config["num_experts"],
        "num_experts_per_tok": config["top_k"],
        "swiglu_limit": EXPERT_CLAMP_LIMIT,
        "output_router_logits": False,
        "sliding_window": None if window is None else window + 1,
        "layer_types": [
            "sliding_attention"
            if window is not None and is_sliding_window_layer(i)
            else "full_attention"
            for i in range(layers)
        ],
        "tie_word_embeddings": False,
        "max_position_embeddings": 131072,
    }
    if factor != 1.0:
        fields["rope_scaling"] = {
            "rope_type": "yarn",
            "factor": factor,
            **{key: ours for key, (ours, _) in _YARN.items()},
        }
    return fields


GPT_OSS = register_family(
    HuggingFaceFamily(
        model_type="gpt_oss",
        backbone="GptOssBackbone",
        architectures=("GptOssForCausalLM",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=GPT_OSS_WEIGHTS,
        ignored_fields=(
            *LLAMA_STYLE_IGNORED_FIELDS,
            "router_aux_loss_coef",
            "output_router_logits",
            "initial_context_length",
        ),
        ignorable_tensors=LLAMA_STYLE_IGNORABLE,
    )
)
