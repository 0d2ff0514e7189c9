"""Hugging Face `gemma3_text` and `gemma3` checkpoints (Gemma 3).

Both load as a `Gemma3Backbone`: `gemma3_text` (`Gemma3ForCausalLM`,
EmbeddingGemma's decoder) text only; `gemma3`
(`Gemma3ForConditionalGeneration`) with its SigLIP vision tower and
multimodal projector as the backbone's `Gemma3VisionEncoder`. Export
writes `gemma3_text` for a text-only backbone and `gemma3` otherwise.

Facts the translation rests on (from `transformers`' Gemma 3 configs and
models):

- Gemma 3's blocks always have the four norms and the query/key norms.
- Layer `i` is local (sliding window) unless `(i + 1) % 6 == 0`
  (`sliding_window_pattern` 6); `layer_types` (or another
  `sliding_window_pattern`) may say otherwise, which the backbone's
  `layer_types` holds. Local layers use RoPE base `rope_local_base_freq`
  (10k), global ones `rope_theta` (1M), which our backbone fixes.
  Linear RoPE scaling is read per layer type from `rope_scaling`
  (global, transformers 4.x) or `rope_parameters`
  (`{"full_attention": ..., "sliding_attention": ...}`, 5.x).
- `gemma3`'s nested `text_config` and `vision_config` hold only the fields
  that differ from their classes' defaults; those defaults are applied.
- The vision tokens per image (`mm_tokens_per_image`) fix the pooling:
  `(image_size // patch_size) // sqrt(mm_tokens_per_image)`.
- Tensors: current `transformers` saves `model.language_model.*`,
  `model.vision_tower.vision_model.*` and `model.multi_modal_projector.*`
  (what export writes); the checkpoints first published used
  `language_model.model.*`, `vision_tower.*` and `multi_modal_projector.*`,
  which load too.
- EmbeddingGemma's pooling head lives in sentence-transformers files
  (`2_Dense/`, `3_Dense/`), not in the checkpoint: only its decoder loads.
"""

import math

from keras_nlp.models.gemma.gemma_huggingface import APPROXIMATE_GELU
from keras_nlp.models.gemma.gemma_huggingface import GEMMA_IGNORED_FIELDS
from keras_nlp.models.gemma.gemma_huggingface import gemma_weights
from keras_nlp.models.gemma.gemma_huggingface import read_activation
from keras_nlp.models.gemma.gemma_huggingface import read_gemma_common
from keras_nlp.models.gemma.gemma_huggingface import read_query_scale
from keras_nlp.models.gemma.gemma_huggingface import write_gemma_common
from keras_nlp.models.gemma.gemma_huggingface import write_query_scale
from keras_nlp.models.gemma3.gemma3_backbone import GLOBAL_LAYER_PERIOD
from keras_nlp.models.gemma3.gemma3_backbone import GLOBAL_ROPE_WAVELENGTH
from keras_nlp.models.gemma3.gemma3_backbone import LAYER_TYPES
from keras_nlp.models.gemma3.gemma3_backbone import LOCAL_ROPE_WAVELENGTH
from keras_nlp.models.gemma3.gemma3_backbone import is_local_layer
from keras_nlp.models.gemma3.gemma3_backbone import local_layers
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceConfig
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Transpose
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface.fields import windowed_layers

# `Gemma3TextConfig`'s and `SiglipVisionConfig`'s defaults, for the nested
# configs of `gemma3` (which omit them).
TEXT_DEFAULTS = {
    "vocab_size": 262_208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "rms_norm_eps": 1e-6,
    "query_pre_attn_scalar": 256,
    "sliding_window": 4096,
}
VISION_DEFAULTS = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "image_size": 224,
    "patch_size": 16,
}
# The epsilon of our vision tower's layer norms.
VISION_LAYER_NORM_EPSILON = 1e-6
TEXT_PREFIX = "model.language_model."
VISION_PREFIX = "model.vision_tower.vision_model."
PROJECTOR_PREFIX = "model.multi_modal_projector."

TEXT_IGNORED_FIELDS = (*GEMMA_IGNORED_FIELDS,)
VISION_IGNORED_FIELDS = (
    # Inference only.
    "attention_dropout",
    # SigLIP's own classification head, which `vision_use_head=False`
    # leaves out, and PaliGemma's fields that Gemma 3 does not use.
    "projection_dim",
    "projector_hidden_act",
)
MULTIMODAL_IGNORED_FIELDS = (
    # Token ids of the prompt format (the tokenizer's business).
    "boi_token_index",
    "eoi_token_index",
    "image_token_index",
    "boi_token_id",
    "eoi_token_id",
    "image_token_id",
)


def _local(index):
    return is_local_layer(index, True)


def _pattern(hf):
    """`index -> local` of `sliding_window_pattern` (every n-th layer
    global; `_sliding_window_pattern` in some configs), for configs
    without `layer_types` (with it, only a description of them)."""
    period = GLOBAL_LAYER_PERIOD
    for field in ("sliding_window_pattern", "_sliding_window_pattern"):
        value = hf.get(field)
        if value is None or hf.data.get("layer_types") is not None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            hf.unsupported(field, value, why=" (expected a positive integer)")
        period = value
    return lambda index: (index + 1) % period != 0


def _period(local):
    """The `sliding_window_pattern` of a list of local flags (every n-th
    layer global), or None when it has none."""
    for period in range(1, len(local) + 2):
        if local == [(i + 1) % period != 0 for i in range(len(local))]:
            return period
    return None


def _rope_entry(hf, field, entry, theta):
    """`(theta, factor)` of one layer type's RoPE dict (or None)."""
    if entry is None:
        return theta, 1.0
    if not isinstance(entry, dict):
        hf.unsupported(field, entry, why=" (expected an object)")
    kind = entry.get("rope_type", entry.get("type", "default"))
    if kind not in ("default", "linear"):
        hf.unsupported(f"{field}.rope_type", kind, ["default", "linear"])
    unknown = sorted(set(entry) - {"rope_type", "type", "rope_theta", "factor"})
    factor = entry.get("factor", 1.0) if kind == "linear" else 1.0
    if unknown or (kind == "default" and entry.get("factor", 1.0) != 1.0):
        hf.unsupported(
            field, entry, why=" (only linear scaling by `factor` is supported)"
        )
    return entry.get("rope_theta", theta), factor


def read_gemma3_rope(hf, local):
    """`(local_factor, global_factor)`; checks both RoPE bases (`local`:
    whether each layer is local)."""
    parameters = hf.get("rope_parameters")
    scaling = hf.get("rope_scaling")
    theta = hf.get("rope_theta", GLOBAL_ROPE_WAVELENGTH)
    local_theta = hf.get("rope_local_base_freq", LOCAL_ROPE_WAVELENGTH)
    full = sliding = None
    if parameters is not None:
        types = {"full_attention", "sliding_attention"}
        if not isinstance(parameters, dict) or not set(parameters) <= types:
            hf.unsupported(
                "rope_parameters",
                parameters,
                why=" (expected 'full_attention' and 'sliding_attention')",
            )
        full = parameters.get("full_attention")
        sliding = parameters.get("sliding_attention")
    global_rope = _rope_entry(hf, "rope_parameters.full_attention", full, theta)
    if scaling is not None:
        legacy = _rope_entry(hf, "rope_scaling", scaling, theta)
        if full is not None and legacy != global_rope:
            hf.unsupported(
                "rope_scaling",
                scaling,
                why=" (it disagrees with rope_parameters.full_attention)",
            )
        global_rope = legacy
    local_rope = _rope_entry(
        hf, "rope_parameters.sliding_attention", sliding, local_theta
    )
    for used, (base, _), fixed, field in (
        (any(local), local_rope, LOCAL_ROPE_WAVELENGTH, "rope_local_base_freq"),
        (not all(local), global_rope, GLOBAL_ROPE_WAVELENGTH, "rope_theta"),
    ):
        if used and base != fixed:
            hf.unsupported(field, base, [fixed], why=" (fixed in Gemma 3)")
    return local_rope[1], global_rope[1]


def read_gemma3_text(hf):
    """Our decoder arguments from a Gemma 3 text config."""
    config = read_gemma_common(hf)
    read_activation(hf, legacy_gelu=False)
    hf.get("hidden_act")  # Gemma 3 models read hidden_activation only.
    num_layers = config["num_layers"]
    local = windowed_layers(hf, num_layers, _pattern(hf))
    use_window = any(local)
    layer_types = None
    if local != [_local(i) for i in range(num_layers)] and use_window:
        layer_types = [LAYER_TYPES[not windowed] for windowed in local]
    window = hf.get("sliding_window")
    if use_window and window is None:
        hf.unsupported(
            "sliding_window", window, why=" (sliding layers need a size)"
        )
    local_factor, global_factor = read_gemma3_rope(hf, local)
    config.update(
        image_size=None,
        **read_query_scale(hf, config, 256),
        layer_types=layer_types,
        use_query_key_norm=True,
        use_post_ffw_norm=True,
        use_post_attention_norm=True,
        attention_logit_soft_cap=hf.get("attn_logit_softcapping"),
        final_logit_soft_cap=hf.get("final_logit_softcapping"),
        use_sliding_window_attention=use_window,
        sliding_window_size=window if window is not None else 1024,
        local_rope_scaling_factor=local_factor,
        global_rope_scaling_factor=global_factor,
        use_bidirectional_attention=hf.get(
            "use_bidirectional_attention", False
        ),
    )
    return config


def nested_config(hf, key, defaults):
    """The nested config `key` of a multimodal `hf`, its class's omitted
    `defaults` applied (also PaliGemma's, Gemma 4's and Qwen 3.5's).

    A `text_config` takes the composite's `tie_word_embeddings` where it
    has none (keras-hub writes it at the top level only, transformers 5 at
    both); where both have it, they must agree.
    """
    data = hf.get(key)
    if not isinstance(data, dict):
        hf.unsupported(key, data, why=" (expected an object)")
    data = {**defaults, **data}
    tied = hf.get("tie_word_embeddings") if key == "text_config" else None
    if tied is not None:
        if data.setdefault("tie_word_embeddings", tied) != tied:
            hf.unsupported(
                "tie_word_embeddings",
                tied,
                [data["tie_word_embeddings"]],
                why=f" (unlike {key}.tie_word_embeddings)",
            )
    return HuggingFaceConfig(data, f"{hf.path} ({key})", hf.model)


def read_siglip(vision):
    """The SigLIP tower of a `siglip_vision_model` config (also
    PaliGemma's): `{image_size, patch_size, num_heads, hidden_dim,
    num_layers, intermediate_dim}`."""
    vision.expect("vision_use_head", (False,), default=False)
    vision.expect("num_channels", (3,), default=3)
    vision.expect("hidden_act", (APPROXIMATE_GELU,), default=APPROXIMATE_GELU)
    vision.expect(
        "layer_norm_eps",
        (VISION_LAYER_NORM_EPSILON,),
        default=VISION_LAYER_NORM_EPSILON,
    )
    return {
        "image_size": vision.require("image_size"),
        "patch_size": vision.require("patch_size"),
        "num_heads": vision.require("num_attention_heads"),
        "hidden_dim": vision.require("hidden_size"),
        "num_layers": vision.require("num_hidden_layers"),
        "intermediate_dim": vision.require("intermediate_size"),
    }


def write_siglip(tower):
    """`vision_config` fields of what `read_siglip` reads."""
    return {
        "model_type": "siglip_vision_model",
        "image_size": tower["image_size"],
        "patch_size": tower["patch_size"],
        "num_attention_heads": tower["num_heads"],
        "hidden_size": tower["hidden_dim"],
        "num_hidden_layers": tower["num_layers"],
        "intermediate_size": tower["intermediate_dim"],
        "layer_norm_eps": VISION_LAYER_NORM_EPSILON,
        "hidden_act": APPROXIMATE_GELU,
        "num_channels": 3,
        "vision_use_head": False,
    }


def read_vision(hf, vision, output_dim):
    """Our `Gemma3VisionEncoder` arguments (a config dict)."""
    tower = read_siglip(vision)
    image_size, patch_size = tower["image_size"], tower["patch_size"]
    tokens = hf.get("mm_tokens_per_image", 256)
    side = math.isqrt(tokens)
    patches = image_size // patch_size
    if side * side != tokens or patches % side:
        hf.unsupported(
            "mm_tokens_per_image",
            tokens,
            why=(
                f" (not a square number of tokens that pools the "
                f"{patches}x{patches} patch grid evenly)"
            ),
        )
    return {
        **tower,
        "output_dim": output_dim,
        "pool_size": patches // side,
        "layer_norm_epsilon": VISION_LAYER_NORM_EPSILON,
        # A fixed name: the layout plan's activation layouts name the
        # encoder, and an automatic one differs from build to build.
        "name": "gemma3_vision_encoder",
    }


def _from_hf(hf):
    if hf.data.get("model_type") != "gemma3":
        return read_gemma3_text(hf)
    text = nested_config(hf, "text_config", TEXT_DEFAULTS)
    config = read_gemma3_text(text)
    text.check_all_read(TEXT_IGNORED_FIELDS)
    vision = nested_config(hf, "vision_config", VISION_DEFAULTS)
    encoder = read_vision(hf, vision, config["hidden_dim"])
    vision.check_all_read(VISION_IGNORED_FIELDS)
    config["image_size"] = encoder["image_size"]
    config["vision_encoder"] = encoder
    return config


def _write_layers(config):
    """`sliding_window`, `layer_types` and (where the pattern has one)
    `sliding_window_pattern`: transformers 4.x reads the pattern only."""
    local = local_layers(
        config["num_layers"],
        config["use_sliding_window_attention"],
        config.get("layer_types"),
    )
    fields = {
        "sliding_window": config["sliding_window_size"],
        "layer_types": [LAYER_TYPES[not windowed] for windowed in local],
    }
    period = _period(local) if any(local) else GLOBAL_LAYER_PERIOD
    if period is not None:
        fields["sliding_window_pattern"] = period
    return fields


def _write_text(config):
    for name in (
        "use_query_key_norm",
        "use_post_ffw_norm",
        "use_post_attention_norm",
    ):
        if not config[name]:
            raise ValueError(
                f"Hugging Face's Gemma 3 always has {name}; this backbone has "
                f"{name}=False."
            )
    if config.get("is_embedding_model"):
        raise ValueError(
            "An embedding model's pooling head (is_embedding_model=True) has "
            "no place in a Hugging Face Gemma 3 checkpoint (EmbeddingGemma "
            "keeps it in sentence-transformers files); export the decoder "
            "with is_embedding_model=False."
        )
    local = config["local_rope_scaling_factor"]
    scale = config["global_rope_scaling_factor"]

    def rope(theta, factor):
        if factor == 1.0:
            return {"rope_type": "default", "rope_theta": theta}
        return {"rope_type": "linear", "factor": factor, "rope_theta": theta}

    fields = {
        **write_gemma_common(config, config["intermediate_dim"]),
        "hidden_activation": APPROXIMATE_GELU,
        "query_pre_attn_scalar": write_query_scale(config),
        "attn_logit_softcapping": config["attention_logit_soft_cap"],
        "final_logit_softcapping": config["final_logit_soft_cap"],
        **_write_layers(config),
        "rope_theta": GLOBAL_ROPE_WAVELENGTH,
        "rope_local_base_freq": LOCAL_ROPE_WAVELENGTH,
        "rope_parameters": {
            "full_attention": rope(GLOBAL_ROPE_WAVELENGTH, scale),
            "sliding_attention": rope(LOCAL_ROPE_WAVELENGTH, local),
        },
        "use_bidirectional_attention": config["use_bidirectional_attention"],
        "max_position_embeddings": 131_072,
    }
    if scale != 1.0:
        # transformers 4.x reads the global scaling here.
        fields["rope_scaling"] = {"rope_type": "linear", "factor": scale}
    return fields


def _vision_config(config):
    encoder = config["vision_encoder"]
    if "config" in encoder:
        encoder = encoder["config"]
    if encoder["layer_norm_epsilon"] != VISION_LAYER_NORM_EPSILON:
        raise ValueError(
            "Hugging Face's Gemma 3 uses one epsilon for its vision norms "
            f"({VISION_LAYER_NORM_EPSILON} in ours); this vision encoder has "
            f"layer_norm_epsilon={encoder['layer_norm_epsilon']}."
        )
    side = (encoder["image_size"] // encoder["patch_size"]) // encoder[
        "pool_size"
    ]
    return write_siglip(encoder), side * side


def _to_hf(config):
    text = _write_text(config)
    if config.get("vision_encoder") is None:
        return text
    vision, tokens = _vision_config(config)
    return {
        "model_type": "gemma3",
        "architectures": ["Gemma3ForConditionalGeneration"],
        "text_config": {"model_type": "gemma3_text", **text},
        "vision_config": vision,
        "mm_tokens_per_image": tokens,
    }


def siglip_weights(prefix=VISION_PREFIX):
    """The SigLIP tower's rows (`VisionTransformerEncoder` named
    `image_encoder`, also PaliGemma's), its tensors under `prefix`."""
    ours = "image_encoder/"
    block = ours + "encoder_block_{j}/"
    layer = prefix + "encoder.layers.{j}."
    rows = [
        Weight(
            ours + "encoder_embeddings/embedding_conv/kernel",
            prefix + "embeddings.patch_embedding.weight",
            # (height, width, channels, out) -> (out, channels, h, w).
            (Transpose((3, 2, 0, 1)),),
        ),
        Weight(
            ours + "encoder_embeddings/embedding_conv/bias",
            prefix + "embeddings.patch_embedding.bias",
        ),
        Weight(
            ours + "encoder_embeddings/position_embedding/embeddings",
            prefix + "embeddings.position_embedding.weight",
        ),
        Weight(
            ours + "encoder_layer_norm/gamma",
            prefix + "post_layernorm.weight",
        ),
        Weight(
            ours + "encoder_layer_norm/beta",
            prefix + "post_layernorm.bias",
        ),
    ]
    dense = {
        "multi_head_attention/query_proj": "self_attn.q_proj",
        "multi_head_attention/key_proj": "self_attn.k_proj",
        "multi_head_attention/value_proj": "self_attn.v_proj",
        "multi_head_attention/out_proj": "self_attn.out_proj",
        "mlp_dense_1": "mlp.fc1",
        "mlp_dense_2": "mlp.fc2",
    }
    for name, theirs in dense.items():
        rows += [
            Weight(
                block + name + "/kernel", layer + theirs + ".weight", KERNEL
            ),
            Weight(block + name + "/bias", layer + theirs + ".bias"),
        ]
    for index in (1, 2):
        for ours_name, theirs_name in (("gamma", "weight"), ("beta", "bias")):
            rows.append(
                Weight(
                    block + f"layer_norm_{index}/{ours_name}",
                    layer + f"layer_norm{index}.{theirs_name}",
                )
            )
    return rows


def vision_weights():
    """The SigLIP tower's and the projector's rows (current names)."""
    return [
        *siglip_weights(),
        Weight(
            "vision_output_encoder/vision_soft_embedding_norm/scale",
            PROJECTOR_PREFIX + "mm_soft_emb_norm.weight",
        ),
        # A (vision hidden, text hidden) matrix in both.
        Weight(
            "vision_output_encoder/vision_input_projection/kernel",
            PROJECTOR_PREFIX + "mm_input_projection_weight",
        ),
    ]


def _weights(config):
    if config.get("vision_encoder") is None:
        return gemma_weights(gemma2_norms=True, query_key_norm=True)
    return [
        *gemma_weights(TEXT_PREFIX, gemma2_norms=True, query_key_norm=True),
        *vision_weights(),
    ]


GEMMA3 = register_family(
    HuggingFaceFamily(
        model_type=("gemma3_text", "gemma3"),
        backbone="Gemma3Backbone",
        architectures=("Gemma3ForCausalLM",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=_weights,
        ignored_fields=(*TEXT_IGNORED_FIELDS, *MULTIMODAL_IGNORED_FIELDS),
        ignorable_tensors=(
            r"(model\.)?(language_model\.)?layers\.\d+\.self_attn\."
            r"rotary_emb\.inv_freq",
            # The tied output projection, when a checkpoint stores it.
            r"(language_model\.)?lm_head\.weight",
        ),
        # The first published multimodal checkpoints' names. The base
        # prefix `model.` is already dropped when they are looked up.
        old_names=(
            (r"^(?:model\.)?language_model\.", "language_model.model."),
        ),
    )
)
