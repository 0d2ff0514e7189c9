"""Hugging Face `gpt_neox` checkpoints (GPT-NeoX-style, tied, tanh GELU).

`attention.query_key_value` is laid out per head: its `3 * hidden` output
rows are `num_heads` groups of `[query | key | value]` of `head_dim` rows
each, which is exactly our fused `(hidden, heads, 3 * head_dim)` kernel
transposed, so it loads (and shards) without reordering.

Our backbone fixes two things that real checkpoints vary, and raises
naming the field otherwise:

- the output projection is the token embedding (`tie_word_embeddings`
  true); Pythia and GPT-NeoX-20B have a separate `embed_out`, for which
  `GPTNeoXBackbone` has no variable;
- the feed-forward uses the tanh-approximated GELU (`gelu_new`,
  `gelu_fast`, `gelu_pytorch_tanh`, as keras-hub's); Pythia's exact
  `"gelu"` differs from it in the fourth decimal.

keras-hub has no Hugging Face loader for GPT-NeoX: the tests write
checkpoints from keras-hub's `GPTNeoXBackbone` with `transformers`' names
and layouts and compare against that model
(`tests/saving/test_huggingface_gpt_neox.py`).
"""

from keras_nlp.saving.huggingface import HEADS_BIAS
from keras_nlp.saving.huggingface import HEADS_KERNEL
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import layer_norm_rows
from keras_nlp.saving.huggingface import linear_rows
from keras_nlp.saving.huggingface import register_family

_BLOCK = "transformer_layer_{i}/"
_LAYER = "gpt_neox.layers.{i}."
_TANH_GELU = ("gelu_new", "gelu_fast", "gelu_pytorch_tanh")


def _dense(ours, theirs, kernel_ops=KERNEL, bias_ops=()):
    return linear_rows(_BLOCK + ours, _LAYER + theirs, kernel_ops, bias_ops)


def _norm(ours, theirs):
    return layer_norm_rows(_BLOCK + ours, _LAYER + theirs)


WEIGHTS = [
    Weight("token_embedding/embeddings", "gpt_neox.embed_in.weight"),
    *_dense(
        "self_attention/query_key_value",
        "attention.query_key_value",
        HEADS_KERNEL,
        HEADS_BIAS,
    ),
    *_dense("self_attention/attention_output", "attention.dense"),
    *_norm("self_attention_layer_norm", "input_layernorm"),
    *_norm("feedforward_layer_norm", "post_attention_layernorm"),
    *_dense("feedforward_intermediate_dense", "mlp.dense_h_to_4h"),
    *_dense("feedforward_output_dense", "mlp.dense_4h_to_h"),
    Weight("layer_norm/gamma", "gpt_neox.final_layer_norm.weight"),
    Weight("layer_norm/beta", "gpt_neox.final_layer_norm.bias"),
]


def one_of(hf, names, default):
    """The value of the first field of `names` present (they are aliases
    across `transformers` versions); raises if two disagree."""
    values = {name: hf.get(name) for name in names}
    present = {k: v for k, v in values.items() if v is not None}
    if len(set(present.values())) > 1:
        first, *others = present
        hf.unsupported(
            others[0],
            present[others[0]],
            [present[first]],
            why=f" (vs {first})",
        )
    return next(iter(present.values()), default)


def _rope(hf):
    """`(rotary fraction, base)`, from v4's fields or v5's
    `rope_parameters`; any RoPE scaling raises."""
    fraction = one_of(hf, ("rotary_pct", "partial_rotary_factor"), 0.25)
    base = one_of(hf, ("rotary_emb_base", "rope_theta"), 10000)
    for field in ("rope_scaling", "rope_parameters"):
        rope = hf.get(field)
        if rope is None:
            continue
        if not isinstance(rope, dict):
            hf.unsupported(field, rope, why=" (expected an object)")
        rope = dict(rope)
        kind = rope.pop("rope_type", None) or rope.pop("type", None)
        if kind not in (None, "default"):
            hf.unsupported(f"{field}.rope_type", kind, ("default",))
        base = rope.pop("rope_theta", base)
        fraction = rope.pop("partial_rotary_factor", fraction)
        if rope:
            hf.unsupported(
                field, rope, why=f" (keys {sorted(rope)} are not understood)"
            )
    return fraction, base


def _from_hf(hf):
    # Checked with transformers' defaults (exact GELU, untied), which our
    # backbone does not have.
    activation = hf.get("hidden_act", "gelu")
    if activation not in _TANH_GELU:
        hf.unsupported(
            "hidden_act",
            activation,
            _TANH_GELU,
            why=" (its feed-forward uses the tanh-approximated GELU)",
        )
    if not hf.get("tie_word_embeddings", False):
        hf.unsupported(
            "tie_word_embeddings",
            hf.get("tie_word_embeddings", False),
            [True],
            why=(
                " (its output projection is the token embedding; it has no "
                "variable for a separate embed_out)"
            ),
        )
    hf.expect("use_parallel_residual", (True,), default=True)
    hf.expect("attention_bias", (True,), default=True)
    fraction, base = _rope(hf)
    return {
        "vocabulary_size": hf.require("vocab_size"),
        "num_layers": hf.require("num_hidden_layers"),
        "num_heads": hf.require("num_attention_heads"),
        "hidden_dim": hf.require("hidden_size"),
        "intermediate_dim": hf.require("intermediate_size"),
        "dropout": hf.get("hidden_dropout", 0.0),
        "rotary_percentage": fraction,
        "rotary_max_wavelength": base,
        "layer_norm_epsilon": hf.get("layer_norm_eps", 1e-5),
        "max_sequence_length": hf.get("max_position_embeddings", 2048),
    }


def _to_hf(config):
    return {
        "vocab_size": config["vocabulary_size"],
        "num_hidden_layers": config["num_layers"],
        "num_attention_heads": config["num_heads"],
        "hidden_size": config["hidden_dim"],
        "intermediate_size": config["intermediate_dim"],
        "hidden_dropout": config["dropout"],
        "attention_dropout": config["dropout"],
        "rotary_pct": config["rotary_percentage"],
        "rotary_emb_base": config["rotary_max_wavelength"],
        "layer_norm_eps": config["layer_norm_epsilon"],
        "max_position_embeddings": config["max_sequence_length"],
        "hidden_act": "gelu_new",
        "use_parallel_residual": True,
        "attention_bias": True,
        "rope_scaling": None,
        "tie_word_embeddings": True,
    }


GPT_NEOX = register_family(
    HuggingFaceFamily(
        model_type="gpt_neox",
        backbone="GPTNeoXBackbone",
        architectures=("GPTNeoXForCausalLM",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=WEIGHTS,
        ignored_fields=(
            # Training only: our one rate is `hidden_dropout`.
            "attention_dropout",
            "classifier_dropout",
        ),
        ignorable_tensors=(
            # Causal-mask and rotary caches older checkpoints carry.
            r"(gpt_neox\.)?layers\.\d+\.attention\."
            r"(bias|masked_bias|rotary_emb\.inv_freq)",
            # The tied output projection.
            r"embed_out\.weight",
        ),
        base_prefix="gpt_neox.",
    )
)
