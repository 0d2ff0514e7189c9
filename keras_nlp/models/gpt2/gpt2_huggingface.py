"""Hugging Face `gpt2` checkpoints (GPT-2, DistilGPT2).

GPT-2's projections are `Conv1D`s, whose weights are stored `(in, out)`
like our kernels (no transpose), and its queries, keys and values are one
fused `c_attn` tensor `(hidden, 3 * hidden)`: the three kernels are its
column blocks, in that order (and the fused bias likewise). The output
projection is the token embedding (`lm_head.weight`, when present, is that
tensor again). Our backbone fixes what most of the config may vary: the
tanh-approximated GELU, `layer_norm_epsilon=1e-5`, attention scaled by
`1 / sqrt(head_dim)` alone; other values raise.
"""

from keras_nlp.saving.huggingface import HEADS_BIAS
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Merge
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import register_family

_BLOCK = "transformer_layer_{i}/"
_LAYER = "transformer.h.{i}."
# The activations transformers computes with the tanh approximation.
_TANH_GELU = ("gelu_new", "gelu_pytorch_tanh")


def _weights(config):
    hidden = config["hidden_dim"]
    rows = [
        Weight("token_embedding/embeddings", "transformer.wte.weight"),
        Weight("position_embedding/embeddings", "transformer.wpe.weight"),
    ]
    for index, name in enumerate(("query", "key", "value")):
        attention = _BLOCK + f"self_attention/{name}/"
        rows += [
            # (hidden, heads, head_dim) is column block `index` of
            # c_attn's (hidden, 3 * hidden).
            Weight(
                attention + "kernel",
                _LAYER + "attn.c_attn.weight",
                (Merge(1),),
                part=(1, index * hidden),
            ),
            Weight(
                attention + "bias",
                _LAYER + "attn.c_attn.bias",
                HEADS_BIAS,
                part=(0, index * hidden),
            ),
        ]
    rows += [
        Weight(
            _BLOCK + "self_attention/attention_output/kernel",
            _LAYER + "attn.c_proj.weight",
            (Merge(0),),
        ),
        Weight(
            _BLOCK + "self_attention/attention_output/bias",
            _LAYER + "attn.c_proj.bias",
        ),
        Weight(
            _BLOCK + "self_attention_layer_norm/gamma", _LAYER + "ln_1.weight"
        ),
        Weight(_BLOCK + "self_attention_layer_norm/beta", _LAYER + "ln_1.bias"),
        Weight(_BLOCK + "feedforward_layer_norm/gamma", _LAYER + "ln_2.weight"),
        Weight(_BLOCK + "feedforward_layer_norm/beta", _LAYER + "ln_2.bias"),
        Weight(
            _BLOCK + "feedforward_intermediate_dense/kernel",
            _LAYER + "mlp.c_fc.weight",
        ),
        Weight(
            _BLOCK + "feedforward_intermediate_dense/bias",
            _LAYER + "mlp.c_fc.bias",
        ),
        Weight(
            _BLOCK + "feedforward_output_dense/kernel",
            _LAYER + "mlp.c_proj.weight",
        ),
        Weight(
            _BLOCK + "feedforward_output_dense/bias",
            _LAYER + "mlp.c_proj.bias",
        ),
        Weight("layer_norm/gamma", "transformer.ln_f.weight"),
        Weight("layer_norm/beta", "transformer.ln_f.bias"),
    ]
    return rows


def _from_hf(hf):
    hidden = hf.require("n_embd")
    hf.expect("activation_function", _TANH_GELU, default="gelu_new")
    hf.expect("layer_norm_epsilon", (1e-5,), default=1e-5)
    hf.expect("scale_attn_weights", (True,), default=True)
    hf.expect("scale_attn_by_inverse_layer_idx", (False,), default=False)
    hf.expect("tie_word_embeddings", (True,), default=True)
    positions = hf.require("n_positions")
    context = hf.get("n_ctx")
    if context is not None and context != positions:
        hf.unsupported(
            "n_ctx", context, [positions], why=" (it differs from n_positions)"
        )
    return {
        "vocabulary_size": hf.require("vocab_size"),
        "num_layers": hf.require("n_layer"),
        "num_heads": hf.require("n_head"),
        "hidden_dim": hidden,
        "intermediate_dim": hf.get("n_inner", 4 * hidden),
        "dropout": hf.get("resid_pdrop", 0.1),
        "max_sequence_length": positions,
    }


def _to_hf(config):
    dropout = config["dropout"]
    return {
        "vocab_size": config["vocabulary_size"],
        "n_layer": config["num_layers"],
        "n_head": config["num_heads"],
        "n_embd": config["hidden_dim"],
        "n_inner": config["intermediate_dim"],
        "n_positions": config["max_sequence_length"],
        "activation_function": "gelu_new",
        "layer_norm_epsilon": 1e-5,
        "resid_pdrop": dropout,
        "embd_pdrop": dropout,
        "attn_pdrop": dropout,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "tie_word_embeddings": True,
    }


GPT2 = register_family(
    HuggingFaceFamily(
        model_type="gpt2",
        backbone="GPT2Backbone",
        architectures=("GPT2LMHeadModel",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=_weights,
        ignored_fields=(
            # Training-only rates: our one `dropout` is `resid_pdrop`.
            "embd_pdrop",
            "attn_pdrop",
            # Softmax in float32 and a reordered matmul: the same numbers
            # in float32, slightly more exact in half precision.
            "reorder_and_upcast_attn",
            # The sequence-summary head of `GPT2DoubleHeadsModel`.
            "summary_type",
            "summary_use_proj",
            "summary_activation",
            "summary_proj_to_labels",
            "summary_first_dropout",
        ),
        ignorable_tensors=(
            # The causal-mask buffers older checkpoints carry.
            r"(transformer\.)?h\.\d+\.attn\.(masked_)?bias",
            # The output projection: the token embedding again.
            r"lm_head\.weight",
        ),
        base_prefix="transformer.",
    )
)
