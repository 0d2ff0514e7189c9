"""Hugging Face `falcon` checkpoints of the Falcon-RW kind.

Our `FalconBackbone` is Falcon-RW (`tiiuae/falcon-rw-1b`): ALiBi, one
key/value head per query head, sequential residuals, biases, exact GELU.
Its `self_attention.query_key_value` fuses the projections per head as
BLOOM's does (`[query | key | value]` rows per head; see
`bloom_huggingface.py`). The other Falcon variants raise naming the field:
`new_decoder_architecture` (Falcon 40B/180B: grouped key/value heads, two
layer norms), `multi_query` (Falcon 7B: one key/value head),
`parallel_attn`, `alibi=false` (rotary), `bias=false` and
`num_kv_heads` other than `num_attention_heads`. A checkpoint has them
in every combination those imply; only
`alibi=true, multi_query=false, new_decoder_architecture=false,
parallel_attn=false, bias=true` builds our backbone.

keras-hub has no Hugging Face loader for Falcon: the tests write
checkpoints from keras-hub's `FalconBackbone` with `transformers`' names and
layouts and compare against that model
(`tests/saving/test_huggingface_falcon.py`).
"""

from keras_nlp.models.bloom.bloom_huggingface import per_head_qkv
from keras_nlp.models.gpt_neo_x.gpt_neo_x_huggingface import one_of
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import layer_norm_rows
from keras_nlp.saving.huggingface import linear_rows
from keras_nlp.saving.huggingface import register_family

_BLOCK = "transformer_layer_{i}/"
_LAYER = "transformer.h.{i}."
# The variant our backbone builds, as `config.json` spells it.
FALCON_RW = {
    "alibi": True,
    "new_decoder_architecture": False,
    "multi_query": False,
    "parallel_attn": False,
    "bias": True,
}
# transformers' defaults (Falcon 7B's), for fields a config leaves out.
_DEFAULTS = {
    "alibi": False,
    "new_decoder_architecture": False,
    "multi_query": True,
    "parallel_attn": True,
    "bias": False,
}


def _weights(config):
    heads = config["num_attention_heads"]
    return [
        Weight(
            "token_embedding/embeddings", "transformer.word_embeddings.weight"
        ),
        *per_head_qkv(
            _BLOCK + "attention/",
            _LAYER + "self_attention.query_key_value",
            heads,
            config["hidden_dim"] // heads,
            ("query_dense", "key_dense", "value_dense"),
        ),
        *linear_rows(
            _BLOCK + "attention/output_dense",
            _LAYER + "self_attention.dense",
            KERNEL,
        ),
        *layer_norm_rows(
            _BLOCK + "input_layernorm", _LAYER + "input_layernorm"
        ),
        *layer_norm_rows(
            _BLOCK + "post_attention_layernorm",
            _LAYER + "post_attention_layernorm",
        ),
        *linear_rows(
            _BLOCK + "dense_h_to_4h", _LAYER + "mlp.dense_h_to_4h", KERNEL
        ),
        *linear_rows(
            _BLOCK + "dense_4h_to_h", _LAYER + "mlp.dense_4h_to_h", KERNEL
        ),
        *layer_norm_rows("final_layernorm", "transformer.ln_f"),
    ]


def _from_hf(hf):
    for field, value in FALCON_RW.items():
        given = hf.get(field, _DEFAULTS[field])
        if given != value:
            hf.unsupported(
                field,
                given,
                [value],
                why=(
                    " (FalconBackbone is Falcon-RW: "
                    + ", ".join(f"{k}={v}" for k, v in FALCON_RW.items())
                    + ")"
                ),
            )
    hidden = hf.require("hidden_size")
    heads = one_of(hf, ("num_attention_heads", "n_head"), None)
    layers = one_of(hf, ("num_hidden_layers", "n_layer"), None)
    for name, value in (
        ("num_attention_heads", heads),
        ("num_hidden_layers", layers),
    ):
        if value is None:
            hf.require(name)
    kv_heads = hf.get("num_kv_heads", heads)
    if kv_heads != heads:
        hf.unsupported(
            "num_kv_heads", kv_heads, [heads], why=" (one per query head)"
        )
    head_dim = hf.get("head_dim")
    if head_dim is not None and head_dim != hidden // heads:
        hf.unsupported("head_dim", head_dim, [hidden // heads])
    hf.expect("activation", ("gelu",), default="gelu")
    hf.expect("tie_word_embeddings", (True,), default=True)
    return {
        "vocabulary_size": hf.require("vocab_size"),
        "num_layers": layers,
        "num_attention_heads": heads,
        "hidden_dim": hidden,
        "intermediate_dim": hf.get("ffn_hidden_size", 4 * hidden),
        "layer_norm_epsilon": hf.get("layer_norm_epsilon", 1e-5),
        "attention_dropout_rate": hf.get("attention_dropout", 0.0),
        "feedforward_dropout_rate": hf.get("hidden_dropout", 0.0),
    }


def _to_hf(config):
    return {
        **FALCON_RW,
        "vocab_size": config["vocabulary_size"],
        "num_hidden_layers": config["num_layers"],
        "num_attention_heads": config["num_attention_heads"],
        "num_kv_heads": config["num_attention_heads"],
        "hidden_size": config["hidden_dim"],
        "ffn_hidden_size": config["intermediate_dim"],
        "layer_norm_epsilon": config["layer_norm_epsilon"],
        "attention_dropout": config["attention_dropout_rate"],
        "hidden_dropout": config["feedforward_dropout_rate"],
        "activation": "gelu",
        "tie_word_embeddings": True,
    }


FALCON = register_family(
    HuggingFaceFamily(
        model_type="falcon",
        backbone="FalconBackbone",
        architectures=("FalconForCausalLM",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=_weights,
        ignored_fields=(
            # Only bounds positions; ALiBi has no table.
            "max_position_embeddings",
            # Rotary settings, unused with ALiBi (checked above).
            "rope_theta",
            "rope_scaling",
            # Only read with new_decoder_architecture (checked above).
            "num_ln_in_parallel_attn",
            # Falcon-RW's remote-code field; transformers' Falcon never
            # reads it.
            "apply_residual_connection_post_layernorm",
        ),
        ignorable_tensors=(r"lm_head\.weight",),
        base_prefix="transformer.",
    )
)
