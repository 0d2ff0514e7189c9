"""Hugging Face `gpt_oss` checkpoints: OpenAI's (MXFP4 experts) and
unquantized ones.

The tensors are Llama's attention with biases on all four projections and
per-head `self_attn.sinks`, a router `mlp.router` with a bias, and the
experts as four stacked tensors: `mlp.experts.gate_up_proj`
`(experts, hidden, 2 * intermediate)` (gate in the even columns, up in the
odd ones, as ours), `gate_up_proj_bias`, `down_proj`
`(experts, intermediate, hidden)` and `down_proj_bias`: the same layouts as
our variables.

OpenAI's `gpt-oss-20b` and `gpt-oss-120b` store `gate_up_proj` and
`down_proj` as MXFP4 (`quantization_config: {"quant_method": "mxfp4"}`,
tensors `*_blocks` and `*_scales`; see `keras_nlp.saving.huggingface.Mxfp4`).
They are dequantized on load, each device reading and dequantizing only
the blocks and scales of its shard, to the variables' dtype (every MXFP4
value is exact in bfloat16 and float32). Export writes the unquantized
layout (and no `quantization_config`).

Which blocks are windowed is Hugging Face's `layer_types` (absent:
`GptOssConfig`'s default, the even blocks 0, 2, ...), which OpenAI's
checkpoints set to the even blocks as OpenAI's reference code does;
keras-hub's backbone windows the odd ones. The backbone's `layer_types`
option carries any other pattern (it stays None, keras-hub's pattern, when
the checkpoint's is that one), and export writes it back.

Hugging Face's `sliding_window` counts the query itself (a query sees the
`sliding_window - 1` tokens before it, as in OpenAI's reference code); our
backbone's (keras-hub's) counts the tokens before it, so ours is theirs
minus one. keras-hub's own loader passes the value through unchanged,
which widens the window by one token. An absent `sliding_window` is
`GptOssConfig`'s default, 128; null windows no block.

A config without `rope_scaling` (or `rope_parameters`) means
`GptOssConfig`'s default, YaRN with factor 32 (and then `transformers`
takes `max_position_embeddings` as the original length); null means plain
RoPE, which export writes for an unscaled backbone.

What does not load, with an error naming the field: other quantization
methods; YaRN parameters other than GPT-OSS's (`beta_fast=32`,
`beta_slow=1`, `original_max_position_embeddings=4096`, `truncate=false`,
the default attention factor); `swiglu_limit` other than 7 and
`swiglu_alpha` other than 1.702.

`router_aux_loss_coef` and `output_router_logits` only matter to Hugging
Face's training loss and outputs (our backbone adds no load-balancing
loss); `initial_context_length` is OpenAI's name for YaRN's
`original_max_position_embeddings`, which `transformers` does not read.
"""

import math

from keras_nlp.models.gpt_oss.gpt_oss_backbone import EXPERT_CLAMP_LIMIT
from keras_nlp.models.gpt_oss.gpt_oss_backbone import LAYER_TYPES
from keras_nlp.models.gpt_oss.gpt_oss_backbone import MOE_BLOCK
from keras_nlp.models.gpt_oss.gpt_oss_backbone import YARN_OPTIONS
from keras_nlp.models.gpt_oss.gpt_oss_backbone import is_sliding_window_layer
from keras_nlp.models.llama.llama_huggingface import read_llama_style
from keras_nlp.models.llama.llama_huggingface import register_llama_style
from keras_nlp.models.llama.llama_huggingface import write_llama_style
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import MXFP4
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import attention_rows
from keras_nlp.saving.huggingface import linear_rows
from keras_nlp.saving.huggingface.fields import windowed_layers
from keras_nlp.saving.huggingface.fields import write_head_dim

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
    *attention_rows(
        _BLOCK + "self_attention", _LAYER + "self_attn", use_bias=True
    ),
    Weight(_ATTENTION + "sinks", _LAYER + "self_attn.sinks"),
    *linear_rows(_MOE + "router/router_dense", _LAYER + "mlp.router"),
    *(
        Weight(
            _MOE + f"experts/{name}",
            _LAYER + f"mlp.experts.{name}",
            stored_as=(MXFP4,),
        )
        for name in ("gate_up_proj", "down_proj")
    ),
    *(
        Weight(_MOE + f"experts/{name}", _LAYER + f"mlp.experts.{name}")
        for name in ("gate_up_proj_bias", "down_proj_bias")
    ),
]
"""The tensor table: our variables have Hugging Face's expert layouts; the
expert kernels may be stored as MXFP4 (OpenAI's checkpoints)."""

# `GptOssConfig`'s defaults: the window size, and the SwiGLU's sigmoid
# gain (ours is fixed, `quick_gelu`'s 1.702).
_DEFAULT_WINDOW = 128
_SWIGLU_ALPHA = 1.702

# `GptOssConfig`'s `rope_scaling` when a config has none (no
# `original_max_position_embeddings`: `transformers` then takes
# `max_position_embeddings`).
_DEFAULT_ROPE_SCALING = {
    "rope_type": "yarn",
    "factor": 32.0,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "truncate": False,
}

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
    defaulted = "rope_scaling" not in hf and "rope_parameters" not in hf
    if defaulted:
        # Absent is `GptOssConfig`'s default YaRN (null is plain RoPE).
        scaling = dict(_DEFAULT_ROPE_SCALING)
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
            why = (
                " (the config has no rope_scaling, which means "
                f"GptOssConfig's default {_DEFAULT_ROPE_SCALING})"
                if defaulted
                else ""
            )
            hf.unsupported(f"{field}.{key}", value, (ours,), why=why)
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
    """Our `(sliding_window, layer_types)` from `sliding_window` and
    `layer_types`."""
    # Absent is `GptOssConfig`'s default; null windows nothing.
    absent = "sliding_window" not in hf
    window = hf.get("sliding_window", _DEFAULT_WINDOW if absent else None)
    # Absent: `GptOssConfig`'s default, the even blocks.
    windowed = windowed_layers(hf, num_layers, lambda i: i % 2 == 0)
    types = [LAYER_TYPES[0] if w else LAYER_TYPES[1] for w in windowed]
    if window is None or not any(windowed):
        return None, None
    if not isinstance(window, int) or isinstance(window, bool) or window < 2:
        hf.unsupported(
            "sliding_window",
            window,
            why=" (need an integer >= 2: it counts the query itself)",
        )
    if windowed == [is_sliding_window_layer(i) for i in range(num_layers)]:
        # keras-hub's pattern: the backbone's default.
        types = None
    # Theirs counts the query; ours the tokens before it.
    return window - 1, types


def _from_hf(hf):
    quantization = hf.get("quantization_config")
    if quantization is not None and (
        not isinstance(quantization, dict)
        or quantization.get("quant_method") != "mxfp4"
    ):
        # Which tensors are MXFP4 the checkpoint's `*_blocks` say.
        hf.unsupported(
            "quantization_config",
            quantization,
            why=(
                " (only quant_method 'mxfp4', OpenAI's, is read: other "
                "quantized checkpoints must be dequantized first)"
            ),
        )
    config = read_llama_style(hf)
    hf.expect("attention_bias", (True,), default=True)
    hf.expect("tie_word_embeddings", (False,), default=False)
    hf.expect("swiglu_limit", (EXPERT_CLAMP_LIMIT,), default=EXPERT_CLAMP_LIMIT)
    hf.expect("swiglu_alpha", (_SWIGLU_ALPHA,), default=_SWIGLU_ALPHA)
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
    window, types = _read_window(hf, config["num_layers"])
    config["sliding_window"] = window
    if types is not None:
        config["layer_types"] = types
    return config


def _to_hf(config):
    window = config["sliding_window"]
    factor = config["rope_scaling_factor"]
    layers = config["num_layers"]
    fields = {
        **write_llama_style(config),
        "rope_theta": config["rope_max_wavelength"],
        "head_dim": write_head_dim(config),
        "attention_bias": True,
        "num_local_experts": config["num_experts"],
        "num_experts_per_tok": config["top_k"],
        "swiglu_limit": EXPERT_CLAMP_LIMIT,
        "output_router_logits": False,
        "sliding_window": None if window is None else window + 1,
        "layer_types": [
            "sliding_attention"
            if window is not None
            and is_sliding_window_layer(i, config.get("layer_types"))
            else "full_attention"
            for i in range(layers)
        ],
        "tie_word_embeddings": False,
        "max_position_embeddings": 131072,
    }
    # Always written: an absent field would read as `GptOssConfig`'s
    # default YaRN, null as plain RoPE.
    fields["rope_scaling"] = None
    if factor != 1.0:
        fields["rope_scaling"] = {
            "rope_type": "yarn",
            "factor": factor,
            **{key: ours for key, (ours, _) in _YARN.items()},
        }
    return fields


GPT_OSS = register_llama_style(
    "gpt_oss",
    "GptOssBackbone",
    _from_hf,
    _to_hf,
    GPT_OSS_WEIGHTS,
    ignored_fields=(
        "router_aux_loss_coef",
        "output_router_logits",
        "initial_context_length",
    ),
)
