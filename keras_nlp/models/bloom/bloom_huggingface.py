"""Hugging Face `bloom` checkpoints (BLOOM 560M to 176B, BLOOMZ).

`self_attention.query_key_value` fuses the query, key and value
projections per head: its `3 * hidden` output rows are `num_heads` groups
of `[query | key | value]` rows (`head_dim` each). Our backbone keeps three
`(hidden, heads, head_dim)` kernels: each is one slice of the view
`(heads, 3 * head_dim, hidden)` of that tensor (`Weight.view`), so a device
reads only the rows of its heads. ALiBi has no weights: it needs
nothing from the checkpoint. The feed-forward is `4 * hidden_size` wide
(as `transformers` builds it, whatever `n_inner` says) with the tanh GELU.

keras-hub has no Hugging Face loader for BLOOM: the tests write checkpoints
from keras-hub's `BloomBackbone` with `transformers`' names and layouts and
compare against that model (`tests/saving/test_huggingface_bloom.py`).
"""

from keras_nlp.models.gpt_neo_x.gpt_neo_x_huggingface import one_of
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Merge
from keras_nlp.saving.huggingface import Transpose
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import layer_norm_rows
from keras_nlp.saving.huggingface import linear_rows
from keras_nlp.saving.huggingface import register_family

_BLOCK = "transformer_layer_{i}/"
_LAYER = "transformer.h.{i}."

# Fields of the Megatron-DeepSpeed training setup that BLOOM's configs
# carry; none changes what the model computes (`pretraining_tp` with
# `slow_but_exact` only reorders the sums of its matmuls).
MEGATRON_FIELDS = (
    "attention_softmax_in_fp32",
    "bias_dropout_fusion",
    "masked_softmax_fusion",
    "offset_alibi",
    "pretraining_tp",
    "skip_bias_add",
    "skip_bias_add_qkv",
    "slow_but_exact",
    "seq_length",
    "unk_token_id",
)


def per_head_qkv(attention, theirs, num_heads, head_dim, names):
    """Rows for three `(hidden, heads, head_dim)` kernels and `(heads,
    head_dim)` biases under `attention` (our path, with `{i}`) that are the
    per-head `[query | key | value]` fused tensor `theirs` (`.weight`,
    `.bias`) of BLOOM and Falcon."""
    hidden = num_heads * head_dim
    rows = []
    for index, name in enumerate(names):
        start = index * head_dim
        rows += [
            Weight(
                attention + name + "/kernel",
                theirs + ".weight",
                # (hidden, heads, head_dim) -> (heads, head_dim, hidden).
                (Transpose((1, 2, 0)),),
                part=(1, start),
                view=(num_heads, 3 * head_dim, hidden),
                view_ops=(Merge(0),),
            ),
            Weight(
                attention + name + "/bias",
                theirs + ".bias",
                part=(1, start),
                view=(num_heads, 3 * head_dim),
                view_ops=(Merge(0),),
            ),
        ]
    return rows


def _weights(config):
    heads = config["num_heads"]
    return [
        Weight(
            "token_embedding/embeddings", "transformer.word_embeddings.weight"
        ),
        *layer_norm_rows(
            "embedding_layernorm", "transformer.word_embeddings_layernorm"
        ),
        *per_head_qkv(
            _BLOCK + "self_attention/",
            _LAYER + "self_attention.query_key_value",
            heads,
            config["hidden_dim"] // heads,
            ("query_dense", "key_dense", "value_dense"),
        ),
        *linear_rows(
            _BLOCK + "self_attention/output_dense",
            _LAYER + "self_attention.dense",
        ),
        *layer_norm_rows(
            _BLOCK + "pre_attention_layernorm", _LAYER + "input_layernorm"
        ),
        *layer_norm_rows(
            _BLOCK + "post_attention_layernorm",
            _LAYER + "post_attention_layernorm",
        ),
        *linear_rows(
            _BLOCK + "mlp_intermediate_dense", _LAYER + "mlp.dense_h_to_4h"
        ),
        *linear_rows(_BLOCK + "mlp_output_dense", _LAYER + "mlp.dense_4h_to_h"),
        *layer_norm_rows("final_layernorm", "transformer.ln_f"),
    ]


def _from_hf(hf):
    hidden = hf.require("hidden_size")
    hf.expect(
        "apply_residual_connection_post_layernorm", (False,), default=False
    )
    hf.expect("tie_word_embeddings", (True,), default=True)
    layers = one_of(hf, ("n_layer", "num_hidden_layers"), None)
    heads = one_of(hf, ("n_head", "num_attention_heads"), None)
    for name, value in (("n_layer", layers), ("n_head", heads)):
        if value is None:
            hf.require(name)
    return {
        "vocabulary_size": hf.require("vocab_size"),
        "num_layers": layers,
        "num_heads": heads,
        "hidden_dim": hidden,
        "intermediate_dim": 4 * hidden,
        "dropout": hf.get("hidden_dropout", 0.0),
        "layer_norm_epsilon": hf.get("layer_norm_epsilon", 1e-5),
    }


def _to_hf(config):
    hidden = config["hidden_dim"]
    if config["intermediate_dim"] != 4 * hidden:
        raise ValueError(
            "Hugging Face's BLOOM feed-forward is 4 * hidden_dim = "
            f"{4 * hidden} wide; this backbone's intermediate_dim is "
            f"{config['intermediate_dim']}."
        )
    return {
        "vocab_size": config["vocabulary_size"],
        "n_layer": config["num_layers"],
        "n_head": config["num_heads"],
        "hidden_size": hidden,
        "hidden_dropout": config["dropout"],
        "attention_dropout": config["dropout"],
        "layer_norm_epsilon": config["layer_norm_epsilon"],
        "apply_residual_connection_post_layernorm": False,
        "tie_word_embeddings": True,
    }


BLOOM = register_family(
    HuggingFaceFamily(
        model_type="bloom",
        backbone="BloomBackbone",
        architectures=("BloomForCausalLM",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=_weights,
        ignored_fields=(
            # Training only: our one rate is `hidden_dropout`.
            "attention_dropout",
            # Not read by transformers' BLOOM (its MLP is 4 * hidden).
            "n_inner",
            *MEGATRON_FIELDS,
        ),
        ignorable_tensors=(r"lm_head\.weight",),
        base_prefix="transformer.",
    )
)
