"""Hugging Face `t5gemma2` checkpoints, text only.

The config nests the encoder's Gemma 3 text config under
`encoder.text_config` (beside the vision tower's `encoder.vision_config`)
and the decoder's fields under `decoder`. The tensors are
`T5Gemma2ForConditionalGeneration`'s (`model.` prefix): one token table,
`encoder.embed_tokens`, which both of our tables load (the decoder's is
Hugging Face's tie to it; export writes both tables only where they are
equal, as the one tensor); each side's `layers.{i}` (the decoder's
`self_attn` is the merged attention) and `norm`. The vision tower's
tensors and fields are skipped: the backbone is text only.
"""

from keras_nlp.models.gemma3.gemma3_huggingface import nested_config
from keras_nlp.models.t5gemma.t5gemma_backbone import FINAL_NORM_NAMES
from keras_nlp.models.t5gemma.t5gemma_huggingface import APPROXIMATE_GELU
from keras_nlp.models.t5gemma.t5gemma_huggingface import SHARED_FIELDS
from keras_nlp.models.t5gemma.t5gemma_huggingface import SIDE_IGNORED_FIELDS
from keras_nlp.models.t5gemma.t5gemma_huggingface import block_rows
from keras_nlp.models.t5gemma.t5gemma_huggingface import write_shared_fields
from keras_nlp.models.t5gemma2.t5gemma2_backbone import GLOBAL_ROPE_WAVELENGTH
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import register_family

SIDE_DEFAULTS = {
    "rms_norm_eps": 1e-6,
    "query_pre_attn_scalar": 256,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "sliding_window": 4096,
    "attn_logit_softcapping": None,
    "final_logit_softcapping": None,
    "hidden_activation": APPROXIMATE_GELU,
    "head_dim": 256,
}
# Read by the vision tower only, or bookkeeping.
TOP_IGNORED_FIELDS = (
    "encoder",
    "decoder",
    "is_encoder_decoder",
    "vocab_size",
    "dropout_rate",
    "attention_dropout",
    "classifier_dropout_rate",
    "initializer_range",
    "use_cache",
    "image_token_index",
    "eoi_token_index",
    "tie_word_embeddings",
)
ENCODER_IGNORED_FIELDS = (
    "text_config",
    "vision_config",
    "mm_tokens_per_image",
    "boi_token_index",
    "eoi_token_index",
    "image_token_index",
    "initializer_range",
    "model_type",
    "dropout_rate",
    "attention_dropout",
    "tie_word_embeddings",
)


def _read_rope(side):
    """`(sliding layers' base, full layers' scaling)` of a side's
    per-layer-type `rope_parameters` (or the older `rope_theta` and
    `rope_scaling`); full layers' base must be Gemma 3's."""
    parameters = side.get("rope_parameters")
    if parameters is None:
        scaling = side.get("rope_scaling") or {}
        return side.get("rope_theta", 10000.0), scaling.get("factor", 1.0)
    sliding = parameters.get("sliding_attention", {})
    full = parameters.get("full_attention", {})
    if full.get("rope_theta", GLOBAL_ROPE_WAVELENGTH) != GLOBAL_ROPE_WAVELENGTH:
        side.unsupported(
            "rope_parameters",
            parameters,
            why=(
                " (full attention's rope_theta must be "
                f"{GLOBAL_ROPE_WAVELENGTH})"
            ),
        )
    for kind, allowed in (
        (sliding, ("default",)),
        (full, ("default", "linear")),
    ):
        if kind.get("rope_type", "default") not in allowed:
            side.unsupported("rope_parameters", parameters, why=" (rope_type)")
    side.get("rope_theta")
    return sliding.get("rope_theta", 10000.0), full.get("factor", 1.0)


def _read_side(side):
    side.expect(
        "hidden_activation", (APPROXIMATE_GELU,), default=APPROXIMATE_GELU
    )
    side.expect("use_qk_norm", (True, False), default=True)
    return {
        "hidden_dim": side.require("hidden_size"),
        "intermediate_dim": side.require("intermediate_size"),
        "num_layers": side.require("num_hidden_layers"),
        "num_attention_heads": side.require("num_attention_heads"),
        "num_key_value_heads": side.require("num_key_value_heads"),
        "head_dim": side.get("head_dim"),
        "layer_types": list(side.require("layer_types")),
    }


def _from_hf(hf):
    encoder_outer = nested_config(hf, "encoder", {})
    encoder = nested_config(encoder_outer, "text_config", SIDE_DEFAULTS)
    decoder = nested_config(hf, "decoder", SIDE_DEFAULTS)
    config = {"vocabulary_size": decoder.require("vocab_size")}
    for name, side in (("encoder", encoder), ("decoder", decoder)):
        for key, value in _read_side(side).items():
            config[f"{name}_{key}"] = value
    for field, ours in SHARED_FIELDS.items():
        value, other = decoder.get(field), encoder.get(field)
        if other != value:
            encoder.unsupported(
                field, other, [value], why=" (one value: the decoder's)"
            )
        config[ours] = value
    if encoder.get("use_qk_norm", True) != decoder.get("use_qk_norm", True):
        encoder.unsupported("use_qk_norm", encoder.get("use_qk_norm"))
    theta, factor = _read_rope(decoder)
    encoder_theta, encoder_factor = _read_rope(encoder)
    for side in (encoder, decoder):
        side.check_all_read(SIDE_IGNORED_FIELDS)
    encoder_outer.check_all_read(ENCODER_IGNORED_FIELDS)
    config.update(
        dropout_rate=hf.get("dropout_rate", 0.0),
        hidden_activation="gelu_approximate",
        tie_word_embeddings=True,
        initializer_range=decoder.get("initializer_range", 0.02),
        cross_attention_hidden_size=config["encoder_hidden_dim"],
        rope_max_wavelength=theta,
        global_rope_scaling_factor=factor,
        encoder_rope_max_wavelength=encoder_theta,
        encoder_global_rope_scaling_factor=encoder_factor,
        use_query_key_norm=decoder.get("use_qk_norm", True),
        vision_encoder=None,
        eoi_token_index=hf.get("eoi_token_index", 256000),
    )
    return config


def _write_rope(theta, factor):
    # Linear even when unscaled (factor 1.0 is the default RoPE): keras-hub
    # reads the full layers' factor from here.
    full = {
        "rope_type": "linear",
        "factor": factor,
        "rope_theta": GLOBAL_ROPE_WAVELENGTH,
    }
    return {
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": theta},
            "full_attention": full,
        }
    }


def _write_side(config, name, theta, factor):
    return {
        "vocab_size": config["vocabulary_size"],
        "hidden_size": config[f"{name}_hidden_dim"],
        "intermediate_size": config[f"{name}_intermediate_dim"],
        "num_hidden_layers": config[f"{name}_num_layers"],
        "num_attention_heads": config[f"{name}_num_attention_heads"],
        "num_key_value_heads": config[f"{name}_num_key_value_heads"],
        "head_dim": config[f"{name}_head_dim"],
        "layer_types": list(config[f"{name}_layer_types"]),
        "hidden_activation": APPROXIMATE_GELU,
        "initializer_range": config["initializer_range"],
        "use_qk_norm": config["use_query_key_norm"],
        "dropout_rate": config["dropout_rate"],
        "tie_word_embeddings": True,
        **write_shared_fields(config),
        **_write_rope(theta, factor),
    }


def _default(value, fallback):
    return fallback if value is None else value


def _to_hf(config):
    if not config["tie_word_embeddings"]:
        raise ValueError(
            "Hugging Face's T5Gemma 2 ties its output projection to its one "
            "token table: only tie_word_embeddings=True exports."
        )
    theta = config["rope_max_wavelength"]
    factor = config["global_rope_scaling_factor"]
    encoder = _write_side(
        config,
        "encoder",
        _default(config["encoder_rope_max_wavelength"], theta),
        _default(config["encoder_global_rope_scaling_factor"], factor),
    )
    decoder = _write_side(config, "decoder", theta, factor)
    return {
        "encoder": {
            "model_type": "t5gemma2_encoder",
            "text_config": {"model_type": "t5gemma2_text", **encoder},
        },
        "decoder": {"model_type": "t5gemma2_decoder", **decoder},
        "is_encoder_decoder": True,
        "vocab_size": config["vocabulary_size"],
        "tie_word_embeddings": True,
        "dropout_rate": config["dropout_rate"],
        "attention_dropout": config["attention_dropout"],
        "classifier_dropout_rate": 0.0,
        "eoi_token_index": config["eoi_token_index"],
    }


def _norm_rows(ours, theirs):
    return [
        Weight(ours + "/query_norm/scale", theirs + ".q_norm.weight"),
        Weight(ours + "/key_norm/scale", theirs + ".k_norm.weight"),
    ]


T5GEMMA2_WEIGHTS = [
    Weight(
        "encoder_token_embedding/embeddings",
        "model.encoder.embed_tokens.weight",
    ),
    Weight(
        "decoder_token_embedding/embeddings",
        "model.encoder.embed_tokens.weight",
    ),
    Weight(FINAL_NORM_NAMES[0] + "/scale", "model.encoder.norm.weight"),
    Weight(FINAL_NORM_NAMES[1] + "/scale", "model.decoder.norm.weight"),
    *block_rows(
        "encoder_layer_{i}/",
        "model.encoder.layers.{i}.",
        [("self_attention", "self_attn")],
    ),
    *_norm_rows(
        "encoder_layer_{i}/self_attention", "model.encoder.layers.{i}.self_attn"
    ),
    *block_rows(
        "decoder_layer_{i}/",
        "model.decoder.layers.{i}.",
        [("merged_attention", "self_attn")],
        decoder=True,
    ),
    *_norm_rows(
        "decoder_layer_{i}/merged_attention",
        "model.decoder.layers.{i}.self_attn",
    ),
]

T5GEMMA2 = register_family(
    HuggingFaceFamily(
        model_type="t5gemma2",
        backbone="T5Gemma2Backbone",
        architectures=("T5Gemma2ForConditionalGeneration",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=T5GEMMA2_WEIGHTS,
        ignored_fields=TOP_IGNORED_FIELDS,
        ignorable_tensors=(
            # The vision tower (not built), the decoder's tie to the one
            # table, and the tied output projection.
            r"model\.encoder\.vision_tower\..*",
            r"model\.encoder\.multi_modal_projector\..*",
            r"model\.(encoder|decoder)\.embed_tokens\.eoi_embedding",
            r"model\.decoder\.embed_tokens\.weight",
            r"lm_head\..*",
        ),
        base_prefix="model.",
    )
)
