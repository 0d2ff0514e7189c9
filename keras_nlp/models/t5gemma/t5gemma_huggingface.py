"""Hugging Face `t5gemma` checkpoints.

The config nests one Gemma 2 config per side, `encoder` and `decoder`
(transformers' `T5GemmaModuleConfig`), beside top-level fields (the tied
output, dropout). The sides may differ in sizes and layer types; the
scalar options our backbone has once (norm epsilon, query scale, soft
caps, window, RoPE base, biases, activation) must agree. The tensors are
`T5GemmaForConditionalGeneration`'s (`model.` prefix): each side's
`embed_tokens`, `layers.{i}` and `norm`, the decoder's `cross_attn`, and
`lm_head.out_proj`, the output projection, read where untied (a tied
checkpoint's copy is skipped).
"""

from keras_nlp.models.gemma3.gemma3_huggingface import nested_config
from keras_nlp.models.t5gemma.t5gemma_backbone import FINAL_NORM_NAMES
from keras_nlp.models.t5gemma.t5gemma_layers import FEEDFORWARD_NAMES
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import attention_rows
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface.fields import read_rope
from keras_nlp.saving.huggingface.fields import whole_as_int
from keras_nlp.saving.huggingface.fields import write_rope

APPROXIMATE_GELU = "gelu_pytorch_tanh"
SIDES = ("encoder", "decoder")
# Fields of each side's config that change nothing we build.
SIDE_IGNORED_FIELDS = (
    "model_type",
    "max_position_embeddings",
    "use_cache",
    "is_decoder",
    "vocab_size",
    "initializer_range",
    "dropout_rate",
    "classifier_dropout_rate",
    "tie_word_embeddings",
    "cross_attention_hidden_size",
    "torch_dtype",
    "dtype",
    "transformers_version",
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
)
# Options our backbone has once: both sides must agree.
SHARED_FIELDS = {
    "rms_norm_eps": "rms_norm_eps",
    "query_pre_attn_scalar": "query_pre_attn_scalar",
    "attention_bias": "attention_bias",
    "attention_dropout": "attention_dropout",
    "sliding_window": "sliding_window",
    "attn_logit_softcapping": "attn_logit_softcapping",
    "final_logit_softcapping": "final_logit_softcapping",
}


def write_shared_fields(config):
    """`SHARED_FIELDS` of our config, typed as transformers 5's strict
    configs check them: the query scalar an int, the soft caps floats."""
    fields = {field: config[ours] for field, ours in SHARED_FIELDS.items()}
    fields["query_pre_attn_scalar"] = whole_as_int(
        fields["query_pre_attn_scalar"]
    )
    for cap in ("attn_logit_softcapping", "final_logit_softcapping"):
        if fields[cap] is not None:
            fields[cap] = float(fields[cap])
    return fields


# transformers' T5GemmaModuleConfig defaults (Gemma 2 2B's).
SIDE_DEFAULTS = {
    "rms_norm_eps": 1e-6,
    "query_pre_attn_scalar": 256,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "sliding_window": 4096,
    "attn_logit_softcapping": 50.0,
    "final_logit_softcapping": 30.0,
    "hidden_activation": APPROXIMATE_GELU,
    "head_dim": 256,
}


def _read_side(side):
    """`{field suffix: value}` of one side's sizes, and its config."""
    side.expect(
        "hidden_activation", (APPROXIMATE_GELU,), default=APPROXIMATE_GELU
    )
    num_layers = side.require("num_hidden_layers")
    layer_types = side.get("layer_types")
    if layer_types is None:
        # Gemma 2's pattern: sliding first, then alternating.
        layer_types = [
            "sliding_attention" if i % 2 == 0 else "full_attention"
            for i in range(num_layers)
        ]
    return {
        "hidden_dim": side.require("hidden_size"),
        "intermediate_dim": side.require("intermediate_size"),
        "num_layers": num_layers,
        "num_attention_heads": side.require("num_attention_heads"),
        "num_key_value_heads": side.get(
            "num_key_value_heads", side.require("num_attention_heads")
        ),
        "head_dim": side.get("head_dim"),
        "layer_types": list(layer_types),
    }


def _from_hf(hf):
    sides = {name: nested_config(hf, name, SIDE_DEFAULTS) for name in SIDES}
    config = {"vocabulary_size": sides["decoder"].require("vocab_size")}
    for name, side in sides.items():
        for key, value in _read_side(side).items():
            config[f"{name}_{key}"] = value
    encoder, decoder = sides["encoder"], sides["decoder"]
    for field, ours in SHARED_FIELDS.items():
        value = decoder.get(field)
        other = encoder.get(field)
        if other != value:
            encoder.unsupported(
                field,
                other,
                [value],
                why=" (the backbone has one value: the decoder's)",
            )
        config[ours] = value
    theta, _, _ = read_rope(decoder, ("default",))
    encoder_theta, _, _ = read_rope(encoder, ("default",))
    if encoder_theta != theta:
        encoder.unsupported("rope_theta", encoder_theta, [theta])
    cross = decoder.get(
        "cross_attention_hidden_size", config["encoder_hidden_dim"]
    )
    if cross != config["encoder_hidden_dim"]:
        decoder.unsupported(
            "cross_attention_hidden_size",
            cross,
            [config["encoder_hidden_dim"]],
            why=" (the encoder's outputs are that wide)",
        )
    for side in sides.values():
        side.check_all_read(SIDE_IGNORED_FIELDS)
    config.update(
        dropout_rate=hf.get("dropout_rate", 0.0),
        hidden_activation="gelu_approximate",
        tie_word_embeddings=hf.get("tie_word_embeddings", True),
        initializer_range=decoder.get("initializer_range", 0.02),
        cross_attention_hidden_size=config["encoder_hidden_dim"],
        rope_max_wavelength=theta,
    )
    return config


def _write_side(config, name):
    fields = {
        # As transformers 5 writes each side's model type.
        "model_type": "t5_gemma_module",
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
        "dropout_rate": config["dropout_rate"],
        **write_shared_fields(config),
        **write_rope(config["rope_max_wavelength"]),
    }
    if name == "decoder":
        fields["is_decoder"] = True
        fields["cross_attention_hidden_size"] = config["encoder_hidden_dim"]
    return fields


def _to_hf(config):
    if config["hidden_activation"] != "gelu_approximate":
        raise ValueError(
            "Hugging Face's T5Gemma gates with tanh-approximated GELU "
            f"({APPROXIMATE_GELU}); this backbone has hidden_activation="
            f"{config['hidden_activation']!r}."
        )
    cross = config.get("cross_attention_hidden_size")
    if cross not in (None, config["encoder_hidden_dim"]):
        raise ValueError(
            "Hugging Face's T5Gemma projects the cross-attention's keys and "
            "values from the encoder's outputs: cross_attention_hidden_size "
            f"must be encoder_hidden_dim ({config['encoder_hidden_dim']}). "
            f"Received: cross_attention_hidden_size={cross}."
        )
    return {
        "encoder": _write_side(config, "encoder"),
        "decoder": _write_side(config, "decoder"),
        "is_encoder_decoder": True,
        "vocab_size": config["vocabulary_size"],
        "tie_word_embeddings": config["tie_word_embeddings"],
        "dropout_rate": config["dropout_rate"],
        "attention_dropout": config["attention_dropout"],
        "classifier_dropout_rate": 0.0,
    }


def block_rows(ours, theirs, attentions, decoder=False, cross_norms=False):
    """The rows of one side's blocks: `attentions` lists `(our name,
    their name)`; a decoder's norms carry the `decoder_` prefix, and
    `cross_norms` adds the cross-attention's."""
    names = {
        "pre_self_attention_layernorm": "pre_self_attn_layernorm",
        "post_self_attention_layernorm": "post_self_attn_layernorm",
        "pre_feedforward_layernorm": "pre_feedforward_layernorm",
        "post_feedforward_layernorm": "post_feedforward_layernorm",
    }
    rows = []
    for our_name, their_name in attentions:
        # Biases (all four projections) where `attention_bias` is set.
        rows += attention_rows(
            ours + our_name, theirs + their_name, use_bias=True
        )
    prefix = "decoder_" if decoder else ""
    if cross_norms:
        names.update(
            pre_cross_attention_layernorm="pre_cross_attn_layernorm",
            post_cross_attention_layernorm="post_cross_attn_layernorm",
        )
    for our_norm, their_norm in names.items():
        rows.append(
            Weight(
                ours + prefix + our_norm + "/scale",
                theirs + their_norm + ".weight",
            )
        )
    for proj in FEEDFORWARD_NAMES.values():
        rows.append(
            Weight(
                ours + f"mlp/{proj}/kernel",
                theirs + f"mlp.{proj}.weight",
                KERNEL,
            )
        )
    return rows


T5GEMMA_WEIGHTS = [
    Weight(
        "encoder_token_embedding/embeddings",
        "model.encoder.embed_tokens.weight",
    ),
    Weight(
        "decoder_token_embedding/embeddings",
        "model.decoder.embed_tokens.weight",
    ),
    Weight(
        "decoder_token_embedding/reverse_embeddings",
        "lm_head.out_proj.weight",
        KERNEL,
    ),
    Weight(FINAL_NORM_NAMES[0] + "/scale", "model.encoder.norm.weight"),
    Weight(FINAL_NORM_NAMES[1] + "/scale", "model.decoder.norm.weight"),
    *block_rows(
        "encoder_layer_{i}/",
        "model.encoder.layers.{i}.",
        [("self_attention", "self_attn")],
    ),
    *block_rows(
        "decoder_layer_{i}/",
        "model.decoder.layers.{i}.",
        [("self_attention", "self_attn"), ("cross_attention", "cross_attn")],
        decoder=True,
        cross_norms=True,
    ),
]

T5GEMMA = register_family(
    HuggingFaceFamily(
        model_type="t5gemma",
        backbone="T5GemmaBackbone",
        architectures=("T5GemmaForConditionalGeneration",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=T5GEMMA_WEIGHTS,
        ignored_fields=(
            "encoder",
            "decoder",
            "is_encoder_decoder",
            "vocab_size",
            "attention_dropout",
            "classifier_dropout_rate",
            "initializer_range",
            "use_cache",
        ),
        ignorable_tensors=(
            # A tied checkpoint's copy of the decoder's table.
            r"lm_head\.out_proj\.weight",
        ),
        base_prefix="model.",
    )
)
