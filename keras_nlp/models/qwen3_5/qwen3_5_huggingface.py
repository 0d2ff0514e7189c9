"""Hugging Face `qwen3_5` and `qwen3_5_text` checkpoints (Qwen 3.5's text).

Both load as a `Qwen3_5Backbone`: `qwen3_5` (`Qwen3_5ForConditionalGeneration`)
from its nested `text_config`, its vision tower left out (`model.visual.*`
tensors are skipped); `qwen3_5_text` as it is. Export writes `qwen3_5`
with the text config nested and the text tensors under
`model.language_model.`, as keras-hub's exporter does, so that keras-hub
and transformers read it.

Facts the translation rests on (keras-hub 0.32's `convert_qwen3_5` and its
exporter, which read and write the same fields and tensors):

- `rope_parameters` holds `rope_theta` and `partial_rotary_factor` (older
  configs: both at the top level) and, for images, `mrope_section`;
  `layer_types` lists `linear_attention` / `full_attention` per layer.
- A full attention layer's `q_proj` gives each head its query then its
  gate (`(heads * 2 * head_dim, hidden)`); its norms, like the layers'
  and the final norm, are stored as offsets from one (`x * (1 + w)`).
- A linear attention layer's `linear_attn.conv1d.weight` is `(channels,
  1, kernel)`; `dt_bias`, `A_log` and `norm.weight` (`x * w`) as ours.
"""

from keras_nlp.models.gemma3.gemma3_huggingface import nested_config
from keras_nlp.models.qwen3_5.qwen3_5_backbone import qwen3_5_layer_types
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Split
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import attention_rows
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface.fields import read_sizes
from keras_nlp.saving.huggingface.fields import write_sizes

TEXT_PREFIX = "model.language_model."
BLOCK = "transformer_layer_{i}/"
LAYER = TEXT_PREFIX + "layers.{i}."
# Fields without effect on the text decoder we build.
IGNORED_FIELDS = (
    "attention_dropout",
    "initializer_range",
    "max_position_embeddings",
    "use_cache",
    "dtype",
    "torch_dtype",
    "mamba_ssm_dtype",
    "full_attention_interval",
    # The multi-token-prediction layers are not built (as in keras-hub).
    "mtp_num_hidden_layers",
    "mtp_use_dedicated_embeddings",
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
)
MULTIMODAL_FIELDS = (
    "vision_config",
    "text_config",
    "image_token_id",
    "video_token_id",
    "vision_start_token_id",
    "vision_end_token_id",
    "language_model_only",
)
# Ours `(channels, kernel)`, theirs `(channels, 1, kernel)`.
CONV_KERNEL = (Split(1, (1, -1)),)
LINEAR_KERNELS = ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")


def read_qwen3_5_text(hf, dense=True):
    """Our Qwen 3.5 arguments (dense, or with `dense=False` those the MoE
    shares) of a text config."""
    if dense:
        sizes = read_sizes(hf, grouped=True)
    else:
        heads = hf.require("num_attention_heads")
        sizes = {
            "vocabulary_size": hf.require("vocab_size"),
            "num_layers": hf.require("num_hidden_layers"),
            "hidden_dim": hf.require("hidden_size"),
            "num_query_heads": heads,
            "num_key_value_heads": hf.get("num_key_value_heads", heads),
        }
    hf.expect("hidden_act", ("silu",), default="silu")
    hf.expect("attention_bias", (False,), default=False)
    hf.expect("attn_output_gate", (True,), default=True)
    mlp_only = hf.get("mlp_only_layers") or []
    if mlp_only:
        hf.unsupported("mlp_only_layers", mlp_only, [[]])
    rope = dict(hf.get("rope_parameters") or {})
    theta = rope.pop("rope_theta", None) or hf.get("rope_theta", 10000)
    fraction = rope.pop("partial_rotary_factor", None)
    if fraction is None:
        fraction = hf.get("partial_rotary_factor", 0.25)
    rope_type = rope.pop("rope_type", "default")
    mrope_section = rope.pop("mrope_section", None)
    rope.pop("mrope_interleaved", None)
    if rope_type != "default" or rope:
        hf.unsupported(
            "rope_parameters",
            hf.get("rope_parameters"),
            why=" (a default RoPE without scaling)",
        )
    num_layers = sizes.pop("num_layers")
    return {
        **sizes,
        "num_layers": num_layers,
        "head_dim": hf.require("head_dim"),
        "layer_types": qwen3_5_layer_types(num_layers, hf.get("layer_types")),
        "partial_rotary_factor": fraction,
        "rope_max_wavelength": theta,
        "layer_norm_epsilon": hf.get("rms_norm_eps", 1e-6),
        "tie_word_embeddings": hf.get("tie_word_embeddings", False),
        "sliding_window_size": None,
        "linear_num_key_heads": hf.require("linear_num_key_heads"),
        "linear_num_value_heads": hf.require("linear_num_value_heads"),
        "linear_key_head_dim": hf.require("linear_key_head_dim"),
        "linear_value_head_dim": hf.require("linear_value_head_dim"),
        "linear_conv_kernel_dim": hf.get("linear_conv_kernel_dim", 4),
        "mrope_section": mrope_section,
    }


def write_qwen3_5_text(config, model_type):
    """The text config fields of our arguments (`intermediate_size` only
    for the dense model)."""
    for name, allowed in (("rope_scaling_factor", 1.0), ("dropout", 0)):
        if config.get(name, allowed) != allowed:
            raise ValueError(
                f"A `{model_type}` checkpoint has no `{name}`: only "
                f"{name}={allowed!r} exports. Received: "
                f"{name}={config[name]!r}."
            )
    if config.get("sliding_window_size") is not None:
        raise ValueError(
            f"A `{model_type}` checkpoint's full attention sees the whole "
            "prefix: only sliding_window_size=None exports. Received: "
            f"sliding_window_size={config['sliding_window_size']!r}."
        )
    rope = {
        "rope_type": "default",
        "rope_theta": config["rope_max_wavelength"],
        "partial_rotary_factor": config["partial_rotary_factor"],
    }
    if config.get("mrope_section") is not None:
        rope["mrope_section"] = list(config["mrope_section"])
        rope["mrope_interleaved"] = True
    sizes = write_sizes({**config, "intermediate_dim": 0}, grouped=True)
    del sizes["intermediate_size"]
    if "intermediate_dim" in config:
        sizes["intermediate_size"] = config["intermediate_dim"]
    return {
        "model_type": model_type,
        **sizes,
        "head_dim": config["head_dim"],
        "rms_norm_eps": config["layer_norm_epsilon"],
        "hidden_act": "silu",
        "attention_bias": False,
        "attn_output_gate": True,
        "tie_word_embeddings": config["tie_word_embeddings"],
        "rope_parameters": rope,
        "layer_types": qwen3_5_layer_types(
            config["num_layers"], config.get("layer_types")
        ),
        "linear_num_key_heads": config["linear_num_key_heads"],
        "linear_num_value_heads": config["linear_num_value_heads"],
        "linear_key_head_dim": config["linear_key_head_dim"],
        "linear_value_head_dim": config["linear_value_head_dim"],
        "linear_conv_kernel_dim": config["linear_conv_kernel_dim"],
    }


def read_nested(hf, text_type, read_text, ignored=IGNORED_FIELDS):
    """`read_text` of `hf`, or of its `text_config` (a multimodal type),
    whose fields besides `ignored` must all be read."""
    if hf.data.get("model_type") == text_type:
        return read_text(hf)
    text = nested_config(hf, "text_config", {})
    config = read_text(text)
    text.check_all_read((*ignored, "model_type"))
    return config


def write_nested(text, architecture, model_type):
    """A multimodal config holding the text config `text` (no vision)."""
    return {
        "architectures": [architecture],
        "model_type": model_type,
        "tie_word_embeddings": text["tie_word_embeddings"],
        "text_config": text,
    }


def qwen3_5_weights(feedforward):
    """The tensor table: embeddings, norms, both attentions, then the
    `feedforward` rows."""
    linear = LAYER + "linear_attn."
    ours = BLOCK + "linear_attn/"
    return [
        Weight(
            "token_embedding/embeddings", TEXT_PREFIX + "embed_tokens.weight"
        ),
        Weight("token_embedding/reverse_embeddings", "lm_head.weight", KERNEL),
        Weight("sequence_output_layernorm/scale", TEXT_PREFIX + "norm.weight"),
        Weight(
            BLOCK + "input_layernorm/scale", LAYER + "input_layernorm.weight"
        ),
        Weight(
            BLOCK + "post_attention_layernorm/scale",
            LAYER + "post_attention_layernorm.weight",
        ),
        *attention_rows(BLOCK + "self_attention", LAYER + "self_attn"),
        Weight(
            BLOCK + "self_attention/query_norm/scale",
            LAYER + "self_attn.q_norm.weight",
        ),
        Weight(
            BLOCK + "self_attention/key_norm/scale",
            LAYER + "self_attn.k_norm.weight",
        ),
        *(
            Weight(ours + f"{name}/kernel", linear + f"{name}.weight", KERNEL)
            for name in (*LINEAR_KERNELS, "out_proj")
        ),
        Weight(ours + "conv1d_kernel", linear + "conv1d.weight", CONV_KERNEL),
        Weight(ours + "dt_bias", linear + "dt_bias"),
        Weight(ours + "A_log", linear + "A_log"),
        Weight(ours + "norm/scale", linear + "norm.weight"),
        *feedforward,
    ]


DENSE_FEEDFORWARD = [
    Weight(
        BLOCK + f"feedforward_{ours}_dense/kernel",
        LAYER + f"mlp.{theirs}_proj.weight",
        KERNEL,
    )
    for ours, theirs in (
        ("gate", "gate"),
        ("intermediate", "up"),
        ("output", "down"),
    )
]
# The vision tower (not built) and a stored head tied to the embedding;
# text-only checkpoints name the text tensors `model.*`.
IGNORABLE_TENSORS = (r"model\.visual\..*", r"lm_head\.weight", r"mtp\..*")
OLD_NAMES = ((r"^model\.language_model\.", "model."),)


def _from_hf(hf):
    return read_nested(hf, "qwen3_5_text", read_qwen3_5_text)


def _to_hf(config):
    text = write_qwen3_5_text(config, "qwen3_5_text")
    return write_nested(text, "Qwen3_5ForConditionalGeneration", "qwen3_5")


QWEN3_5 = register_family(
    HuggingFaceFamily(
        model_type=("qwen3_5", "qwen3_5_text"),
        backbone="Qwen3_5Backbone",
        architectures=("Qwen3_5ForConditionalGeneration",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=qwen3_5_weights(DENSE_FEEDFORWARD),
        ignored_fields=(*IGNORED_FIELDS, *MULTIMODAL_FIELDS),
        ignorable_tensors=IGNORABLE_TENSORS,
        base_prefix=TEXT_PREFIX,
        old_names=OLD_NAMES,
    )
)
