"""Hugging Face `bart` checkpoints (the encoder-decoder backbone).

A `BartModel` checkpoint (no prefix) and a `BartForConditionalGeneration`
one (`model.` prefix; `lm_head.weight` and `final_logits_bias` skipped)
both load. Both position tables have Hugging Face's two leading rows,
which the backbone does not: import skips them, export writes zeros.
The embedding copies `encoder.embed_tokens` and `decoder.embed_tokens`
are Hugging Face's ties to `shared` and are skipped. The encoder and
decoder must have equal depth, heads and feed-forward width, and the
embeddings must not be scaled (`scale_embedding`), as in BART base and
large. `normalize_before`, `add_final_layer_norm` and the other fields of
older configs are ignored, as current Hugging Face ignores them.
"""

from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Pad
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import attention_rows
from keras_nlp.saving.huggingface import layer_norm_rows
from keras_nlp.saving.huggingface import linear_rows
from keras_nlp.saving.huggingface import register_family

# Rows of Hugging Face's position tables before the first position.
POSITION_OFFSET = 2


def _same(hf, encoder, decoder):
    """The value of the encoder's field, which the decoder's must equal."""
    value = hf.require(encoder)
    other = hf.get(decoder, value)
    if other != value:
        hf.unsupported(
            decoder,
            other,
            [value],
            why=f" (its decoder is shaped like its encoder: {encoder}={value})",
        )
    return value


def _from_hf(hf):
    hf.expect("activation_function", ("gelu",), default="gelu")
    hf.expect("scale_embedding", (False,), default=False)
    # Ties `encoder.embed_tokens` and `decoder.embed_tokens` to `shared`
    # (true in transformers 5's configs); untied, each could differ from
    # the one embedding the backbone has.
    hf.expect("tie_word_embeddings", (True,), default=True)
    layers = _same(hf, "encoder_layers", "decoder_layers")
    stored = hf.get("num_hidden_layers", layers)
    if stored != layers:
        hf.unsupported("num_hidden_layers", stored, [layers])
    return {
        "vocabulary_size": hf.require("vocab_size"),
        "num_layers": layers,
        "num_heads": _same(
            hf, "encoder_attention_heads", "decoder_attention_heads"
        ),
        "hidden_dim": hf.require("d_model"),
        "intermediate_dim": _same(hf, "encoder_ffn_dim", "decoder_ffn_dim"),
        "dropout": hf.get("dropout", 0.1),
        "max_sequence_length": hf.get("max_position_embeddings", 1024),
    }


def _to_hf(config):
    return {
        "vocab_size": config["vocabulary_size"],
        "num_hidden_layers": config["num_layers"],
        "encoder_layers": config["num_layers"],
        "decoder_layers": config["num_layers"],
        "encoder_attention_heads": config["num_heads"],
        "decoder_attention_heads": config["num_heads"],
        "d_model": config["hidden_dim"],
        "encoder_ffn_dim": config["intermediate_dim"],
        "decoder_ffn_dim": config["intermediate_dim"],
        "dropout": config["dropout"],
        "max_position_embeddings": config["max_sequence_length"],
        "activation_function": "gelu",
        "scale_embedding": False,
    }


def _attention(ours, theirs):
    return attention_rows(ours, theirs, output="out_proj", use_bias=True)


def _feedforward(ours, theirs):
    return [
        *linear_rows(ours + "feedforward_intermediate_dense", theirs + "fc1"),
        *linear_rows(ours + "feedforward_output_dense", theirs + "fc2"),
        *layer_norm_rows(
            ours + "feedforward_layer_norm", theirs + "final_layer_norm"
        ),
    ]


_ENCODER = "transformer_encoder_layer_{i}/"
_DECODER = "transformer_decoder_layer_{i}/"
_ENCODER_LAYER = "model.encoder.layers.{i}."
_DECODER_LAYER = "model.decoder.layers.{i}."

WEIGHTS = [
    Weight("token_embedding/embeddings", "model.shared.weight"),
    *[
        row
        for side in ("encoder", "decoder")
        for row in (
            Weight(
                f"{side}_position_embedding/embeddings",
                f"model.{side}.embed_positions.weight",
                (Pad(0, POSITION_OFFSET),),
            ),
            *layer_norm_rows(
                f"{side}_embeddings_layer_norm",
                f"model.{side}.layernorm_embedding",
            ),
        )
    ],
    *_attention(
        _ENCODER + "self_attention_layer", _ENCODER_LAYER + "self_attn"
    ),
    *layer_norm_rows(
        _ENCODER + "self_attention_layer_norm",
        _ENCODER_LAYER + "self_attn_layer_norm",
    ),
    *_feedforward(_ENCODER, _ENCODER_LAYER),
    *_attention(_DECODER + "self_attention", _DECODER_LAYER + "self_attn"),
    *layer_norm_rows(
        _DECODER + "self_attention_layer_norm",
        _DECODER_LAYER + "self_attn_layer_norm",
    ),
    *_attention(_DECODER + "cross_attention", _DECODER_LAYER + "encoder_attn"),
    *layer_norm_rows(
        _DECODER + "cross_attention_layer_norm",
        _DECODER_LAYER + "encoder_attn_layer_norm",
    ),
    *_feedforward(_DECODER, _DECODER_LAYER),
]

BART = register_family(
    HuggingFaceFamily(
        model_type="bart",
        backbone="BartBackbone",
        architectures=("BartModel",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=WEIGHTS,
        ignored_fields=(
            # Training only.
            "attention_dropout",
            "activation_dropout",
            "encoder_layerdrop",
            "decoder_layerdrop",
            "classifier_dropout",
            "classif_dropout",
            "init_std",
            "gradient_checkpointing",
            "num_labels",
            # Fields of older configs that current Hugging Face ignores.
            "add_bias_logits",
            "add_final_layer_norm",
            "normalize_before",
            "normalize_embedding",
            "static_position_embeddings",
            "extra_pos_embeddings",
            "force_bos_token_to_be_generated",
            "output_past",
        ),
        ignorable_tensors=(
            # Hugging Face's ties to `shared`, and the generation head.
            r"(model\.)?(encoder|decoder)\.embed_tokens\.weight",
            r"lm_head\.weight",
            r"final_logits_bias",
            r"classification_head\..*",
        ),
        base_prefix="model.",
    )
)
