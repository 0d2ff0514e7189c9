"""Hugging Face `gemma4_text` and `gemma4` checkpoints (Gemma 4's text).

Both load as a `Gemma4Backbone`: `gemma4_text` (`Gemma4ForCausalLM`) as
it is; `gemma4` (`Gemma4ForConditionalGeneration`) from its nested
`text_config`, its vision and audio towers left out (their tensors are
skipped). Export writes `gemma4_text`: the backbone is the text decoder.

Facts the translation rests on (transformers' `Gemma4TextConfig`, and
keras-hub's `convert_gemma4`, which reads the same fields and tensors):

- `layer_types` lists `sliding_attention` / `full_attention` per layer;
  `rope_parameters` holds one RoPE per kind: `sliding_attention` (default
  RoPE, its `rope_theta`) and `full_attention` (`proportional`, its
  `rope_theta` and `partial_rotary_factor`).
- Global layers take `global_head_dim` and, with `attention_k_eq_v`,
  `num_global_key_value_heads` key/value heads whose keys are the values
  (no `v_proj`).
- The last `num_kv_shared_layers` layers use the keys and values of the
  last earlier layer of their kind; their own `k_proj`/`v_proj`/`k_norm`
  tensors, if stored, are unused and skipped.
- Norm weights multiply as they are (`x * weight`, unlike Gemma 3's
  `1 + weight`); `layer_scalar` is stored with shape `(1,)`.
- Experts: `experts.gate_up_proj` `(experts, 2 * width, hidden)` (gate
  rows first), `experts.down_proj` `(experts, hidden, width)`, the router
  `router.proj`, `router.scale` and `router.per_expert_scale`.
"""

from keras_nlp.models.gemma.gemma_decoder_block import FEEDFORWARD_NAMES
from keras_nlp.models.gemma.gemma_huggingface import APPROXIMATE_GELU
from keras_nlp.models.gemma.gemma_huggingface import HEADS_FIRST_KERNEL
from keras_nlp.models.gemma3.gemma3_huggingface import nested_config
from keras_nlp.models.gemma4.gemma4_backbone import GLOBAL_ROPE_WAVELENGTH
from keras_nlp.models.gemma4.gemma4_backbone import LOCAL_ROPE_WAVELENGTH
from keras_nlp.models.gemma4.gemma4_backbone import global_layers
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Merge
from keras_nlp.saving.huggingface import Transpose
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import attention_rows
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface.fields import read_sizes
from keras_nlp.saving.huggingface.fields import write_sizes

TEXT_PREFIX = "model.language_model."
_BLOCK = "decoder_block_{i}/"
# Fields read elsewhere or without effect on the text decoder.
IGNORED_FIELDS = (
    "attention_bias",
    "attention_dropout",
    "initializer_range",
    "max_position_embeddings",
    "use_cache",
    "final_logit_softcapping",
    "dtype",
    "torch_dtype",
    "_sliding_window_pattern",
    "sliding_window_pattern",
    "use_bidirectional_attention",
)
MULTIMODAL_FIELDS = (
    "vision_config",
    "audio_config",
    "text_config",
    "boi_token_id",
    "eoi_token_id",
    "boa_token_id",
    "eoa_token_id",
    # transformers 5's spelling of the end-of-audio token.
    "eoa_token_index",
    "image_token_id",
    "audio_token_id",
    "video_token_id",
    "vision_soft_tokens_per_image",
    "audio_soft_tokens_per_clip",
    "initializer_range",
)
# A `(1,)` tensor of theirs as our scalar.
SCALAR = (Merge(0, 0),)


def _rope(hf, kind, default_theta):
    """`(theta, partial factor)` of one attention kind's RoPE."""
    parameters = hf.get("rope_parameters") or {}
    entry = dict(parameters.get(kind) or {})
    theta = entry.pop("rope_theta", hf.get("rope_theta", default_theta))
    rope_type = entry.pop("rope_type", "default")
    fraction = entry.pop("partial_rotary_factor", 1.0)
    allowed = ("default", "proportional")
    if rope_type not in allowed or entry:
        hf.unsupported(
            f"rope_parameters.{kind}",
            parameters.get(kind),
            why=f" (a {' or '.join(allowed)} RoPE without scaling)",
        )
    return theta, fraction


# transformers' head size of the global layers when a config names none.
TRANSFORMERS_GLOBAL_HEAD_DIM = 512
_GLOBAL_OVERRIDES = ("head_dim", "num_key_value_heads")


def _global_layer_overrides(hf, layer_types):
    """`(global head_dim, global key/value heads or None)`.

    transformers 5 writes them as `per_layer_config`, overrides keyed by
    layer index (zero-padded) for each full-attention layer; earlier
    configs, and keras-hub, as `global_head_dim` and
    `num_global_key_value_heads` (transformers reads those only without a
    `per_layer_config`, the head size defaulting to 512).
    """
    legacy_head_dim = hf.get("global_head_dim")
    legacy_heads = hf.get("num_global_key_value_heads")
    per_layer = hf.get("per_layer_config")
    if per_layer is None:
        head_dim = legacy_head_dim or TRANSFORMERS_GLOBAL_HEAD_DIM
        return head_dim, legacy_heads
    full = [i for i, kind in enumerate(layer_types) if kind == "full_attention"]
    try:
        overrides = {int(index): dict(v) for index, v in per_layer.items()}
    except (TypeError, ValueError, AttributeError):
        overrides = None
    if overrides == {}:
        # Every layer as the config says.
        return hf.require("head_dim"), None
    kinds = {tuple(sorted(v.items())) for v in (overrides or {}).values()}
    if (
        overrides is None
        or sorted(overrides) != full
        or len(kinds) != 1
        or set(next(iter(overrides.values()))) - set(_GLOBAL_OVERRIDES)
    ):
        hf.unsupported(
            "per_layer_config",
            per_layer,
            why=(
                " (one override of "
                + " and ".join(_GLOBAL_OVERRIDES)
                + f" shared by every full_attention layer, {full}, and none "
                "for the sliding ones)"
            ),
        )
    common = next(iter(overrides.values()))
    return common.get("head_dim", hf.require("head_dim")), common.get(
        "num_key_value_heads"
    )


def read_gemma4_text(hf):
    """Our `Gemma4Backbone` arguments from a Gemma 4 text config."""
    sizes = read_sizes(hf, grouped=True)
    hf.expect(
        "hidden_activation", (APPROXIMATE_GELU,), default=APPROXIMATE_GELU
    )
    hf.expect("tie_word_embeddings", (True,), default=True)
    hf.expect("attention_bias", (False,), default=False)
    num_layers = sizes["num_layers"]
    layer_types = hf.get("layer_types")
    if layer_types is None:
        period = hf.get("_sliding_window_pattern") or 6
        layer_types = [
            "full_attention" if glob else "sliding_attention"
            for glob in global_layers(num_layers, period)
        ]
    local_theta, local_fraction = _rope(
        hf, "sliding_attention", LOCAL_ROPE_WAVELENGTH
    )
    if local_fraction != 1:
        hf.unsupported(
            "rope_parameters.sliding_attention.partial_rotary_factor",
            local_fraction,
            [1.0],
        )
    global_theta, global_fraction = _rope(
        hf, "full_attention", GLOBAL_ROPE_WAVELENGTH
    )
    # keras-hub writes the global key/value heads alone; transformers
    # with `attention_k_eq_v` (keys as values exactly where the global
    # heads are their own).
    global_head_dim, global_key_value_heads = _global_layer_overrides(
        hf, layer_types
    )
    keys_as_values = hf.get(
        "attention_k_eq_v", global_key_value_heads is not None
    )
    if keys_as_values and global_key_value_heads is None:
        global_key_value_heads = sizes["num_key_value_heads"]
    if global_key_value_heads is not None and not keys_as_values:
        hf.unsupported(
            "attention_k_eq_v",
            keys_as_values,
            [True],
            why=" (global key/value heads of their own are keys as values)",
        )
    moe = bool(hf.get("enable_moe_block", False))
    experts = {
        name: hf.get(name)
        for name in ("num_experts", "moe_intermediate_size", "top_k_experts")
    }
    if not moe:
        # transformers writes them (null) for dense models too.
        for name, value in experts.items():
            if value is not None:
                hf.unsupported(
                    name, value, [None], why=" without enable_moe_block"
                )
    window = hf.get("sliding_window")
    return {
        "vocabulary_size": sizes["vocabulary_size"],
        "image_size": None,
        "num_layers": num_layers,
        "num_query_heads": sizes["num_query_heads"],
        "num_key_value_heads": sizes["num_key_value_heads"],
        "hidden_dim": sizes["hidden_dim"],
        "intermediate_dim": sizes["intermediate_dim"],
        "head_dim": hf.require("head_dim"),
        "attention_logit_soft_cap": hf.get("attn_logit_softcapping"),
        "final_logit_soft_cap": hf.get("final_logit_softcapping"),
        "use_sliding_window_attention": bool(window),
        "sliding_window_size": window or 512,
        "layer_types": list(layer_types),
        "global_head_dim": global_head_dim,
        "layer_norm_epsilon": hf.get("rms_norm_eps", 1e-6),
        "num_kv_shared_layers": hf.get("num_kv_shared_layers", 0) or 0,
        "num_global_key_value_heads": global_key_value_heads,
        "hidden_size_per_layer_input": (
            hf.get("hidden_size_per_layer_input") or 0
        ),
        "vocab_size_per_layer_input": hf.get("vocab_size_per_layer_input"),
        "global_rope_wavelength": global_theta,
        "local_rope_wavelength": local_theta,
        "global_rope_partial_rotary_factor": global_fraction,
        "use_double_wide_mlp": bool(hf.get("use_double_wide_mlp", False)),
        "enable_moe_block": moe,
        "num_experts": experts["num_experts"],
        "expert_intermediate_dim": experts["moe_intermediate_size"],
        "num_experts_per_token": experts["top_k_experts"] or 8,
    }


def write_gemma4_text(config):
    """The `gemma4_text` config fields of our arguments."""
    if not config.get("use_sliding_window_attention", True):
        raise ValueError(
            "A `gemma4_text` checkpoint's local layers always attend within "
            "`sliding_window`: only use_sliding_window_attention=True "
            "exports. Received: use_sliding_window_attention=False."
        )
    for name in ("local_rope_scaling_factor", "global_rope_scaling_factor"):
        if config.get(name, 1.0) != 1.0:
            raise ValueError(
                f"`gemma4_text` has no RoPE scaling: only {name}=1.0 "
                f"exports. Received: {name}={config[name]!r}."
            )
    global_heads = config.get("num_global_key_value_heads")
    moe = bool(config.get("enable_moe_block"))
    layer_types = config.get("layer_types") or [
        "full_attention" if glob else "sliding_attention"
        for glob in global_layers(
            config["num_layers"], config.get("sliding_window_pattern", 6)
        )
    ]
    global_head_dim = config.get("global_head_dim") or config["head_dim"]
    overrides = {"head_dim": global_head_dim}
    if global_heads is not None:
        overrides["num_key_value_heads"] = global_heads
    full = [i for i, kind in enumerate(layer_types) if kind == "full_attention"]
    digits = len(str(max(full))) if full else 1
    return {
        "model_type": "gemma4_text",
        "architectures": ["Gemma4ForCausalLM"],
        **write_sizes(config, grouped=True),
        "head_dim": config["head_dim"],
        # transformers 5 reads `per_layer_config` (keys zero-padded as it
        # writes them); keras-hub the two fields beside it.
        "per_layer_config": {
            str(index).zfill(digits): dict(overrides) for index in full
        },
        "global_head_dim": global_head_dim,
        "attention_k_eq_v": global_heads is not None,
        "num_global_key_value_heads": global_heads,
        "hidden_activation": APPROXIMATE_GELU,
        "rms_norm_eps": config["layer_norm_epsilon"],
        "sliding_window": config["sliding_window_size"],
        "layer_types": list(layer_types),
        "rope_parameters": {
            "full_attention": {
                "partial_rotary_factor": config.get(
                    "global_rope_partial_rotary_factor"
                )
                or 1.0,
                "rope_theta": config.get("global_rope_wavelength")
                or GLOBAL_ROPE_WAVELENGTH,
                "rope_type": "proportional",
            },
            "sliding_attention": {
                "rope_theta": config.get("local_rope_wavelength")
                or LOCAL_ROPE_WAVELENGTH,
                "rope_type": "default",
            },
        },
        "attn_logit_softcapping": config.get("attention_logit_soft_cap"),
        "final_logit_softcapping": config.get("final_logit_soft_cap"),
        "num_kv_shared_layers": config.get("num_kv_shared_layers", 0),
        "hidden_size_per_layer_input": config.get(
            "hidden_size_per_layer_input", 0
        ),
        "vocab_size_per_layer_input": config.get("vocab_size_per_layer_input")
        or config["vocabulary_size"],
        "use_double_wide_mlp": bool(config.get("use_double_wide_mlp")),
        "enable_moe_block": moe,
        "num_experts": config.get("num_experts") if moe else None,
        "top_k_experts": config.get("num_experts_per_token") if moe else None,
        "moe_intermediate_size": (
            config.get("expert_intermediate_dim") if moe else None
        ),
        "attention_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": True,
    }


def gemma4_weights(config, prefix="model."):
    """The tensor table of a `Gemma4Backbone` of `config`, the text
    model's tensors under `prefix`."""
    layer = prefix + "layers.{i}."
    names = FEEDFORWARD_NAMES
    rows = [
        Weight("token_embedding/embeddings", prefix + "embed_tokens.weight"),
        Weight(
            "per_layer_token_embedding/embeddings",
            prefix + "embed_tokens_per_layer.weight",
        ),
        Weight(
            "per_layer_model_projection/kernel",
            prefix + "per_layer_model_projection.weight",
            KERNEL,
        ),
        Weight(
            "per_layer_projection_norm/scale",
            prefix + "per_layer_projection_norm.weight",
        ),
        Weight("final_normalization/scale", prefix + "norm.weight"),
        Weight(_BLOCK + "layer_scalar", layer + "layer_scalar", SCALAR),
        *attention_rows(
            _BLOCK + "attention",
            layer + "self_attn",
            kernel_ops=HEADS_FIRST_KERNEL,
        ),
        Weight(
            _BLOCK + "attention/query_norm/scale",
            layer + "self_attn.q_norm.weight",
        ),
        Weight(
            _BLOCK + "attention/key_norm/scale",
            layer + "self_attn.k_norm.weight",
        ),
        *[
            Weight(
                _BLOCK + f"{ours}/kernel",
                layer + f"mlp.{theirs}.weight",
                KERNEL,
            )
            for ours, theirs in (
                (names["gate"], "gate_proj"),
                (names["intermediate"], "up_proj"),
                (names["output"], "down_proj"),
            )
        ],
        Weight(
            _BLOCK + "per_layer_input_gate/kernel",
            layer + "per_layer_input_gate.weight",
            KERNEL,
        ),
        Weight(
            _BLOCK + "per_layer_up_proj/kernel",
            layer + "per_layer_projection.weight",
            KERNEL,
        ),
        Weight(
            _BLOCK + "post_per_layer_input_norm/scale",
            layer + "post_per_layer_input_norm.weight",
        ),
    ]
    norms = {
        "pre_attention_norm": "input_layernorm",
        "post_attention_norm": "post_attention_layernorm",
        "pre_ffw_norm": "pre_feedforward_layernorm",
        "post_ffw_norm": "post_feedforward_layernorm",
        "post_ffw_norm_dense": "post_feedforward_layernorm_1",
        "pre_ffw_norm_moe": "pre_feedforward_layernorm_2",
        "post_ffw_norm_moe_path": "post_feedforward_layernorm_2",
    }
    rows += [
        Weight(_BLOCK + f"{ours}/scale", layer + f"{theirs}.weight")
        for ours, theirs in norms.items()
    ]
    if config.get("enable_moe_block"):
        width = config["expert_intermediate_dim"]
        experts = _BLOCK + "moe_expert_bank/"
        expert_ops = (Transpose((0, 2, 1)),)
        rows += [
            Weight(_BLOCK + "moe_router/per_dim_scale", layer + "router.scale"),
            Weight(
                _BLOCK + "moe_router/proj/kernel",
                layer + "router.proj.weight",
                KERNEL,
            ),
            Weight(
                experts + "per_expert_scale",
                layer + "router.per_expert_scale",
            ),
            Weight(
                experts + "gate_proj",
                layer + "experts.gate_up_proj",
                expert_ops,
                part=(1, 0),
            ),
            Weight(
                experts + "up_proj",
                layer + "experts.gate_up_proj",
                expert_ops,
                part=(1, width),
            ),
            Weight(
                experts + "down_proj", layer + "experts.down_proj", expert_ops
            ),
        ]
    return rows


def _from_hf(hf):
    if hf.data.get("model_type") != "gemma4":
        return read_gemma4_text(hf)
    text = nested_config(hf, "text_config", {})
    config = read_gemma4_text(text)
    text.check_all_read((*IGNORED_FIELDS, "model_type"))
    return config


def _weights(config):
    return gemma4_weights(config)


GEMMA4 = register_family(
    HuggingFaceFamily(
        model_type=("gemma4_text", "gemma4"),
        backbone="Gemma4Backbone",
        architectures=("Gemma4ForCausalLM",),
        config_from_hf=_from_hf,
        config_to_hf=write_gemma4_text,
        weights=_weights,
        ignored_fields=(*IGNORED_FIELDS, *MULTIMODAL_FIELDS),
        ignorable_tensors=(
            # Sharing layers' unused key/value projections.
            r"(model\.)?(language_model\.)?layers\.\d+\.self_attn\."
            r"(k_proj|v_proj|k_norm)\.weight",
            # The towers of `gemma4` (not built) and a stored tied head.
            r"(model\.)?(vision_tower|audio_tower|embed_vision|embed_audio)"
            r"\..*",
            r"(language_model\.)?lm_head\.weight",
        ),
        # `gemma4`'s text tensors, under `model.language_model.`.
        old_names=(
            (r"^model\.", "model.language_model."),
            (r"^", "language_model."),
        ),
    )
)
