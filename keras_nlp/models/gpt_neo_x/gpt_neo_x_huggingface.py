"""Hugging Face `gpt_neox` checkpoints (Pythia, GPT-NeoX-20B).

`attention.query_key_value` is laid out per head: its `3 * hidden` output
rows are `num_heads` groups of `[query | key | value]` of `head_dim` rows
each, which is exactly our fused `(hidden, heads, 3 * head_dim)` kernel
transposed, so it loads (and shards) without reordering.

The fields real checkpoints vary map to backbone options:

- `hidden_act`: `"gelu"` (exact, erf-based: Pythia, GPT-NeoX-20B) is
  `hidden_activation="gelu"`; the tanh approximations (`gelu_new`,
  `gelu_fast`, `gelu_pytorch_tanh`) are keras-hub's `"gelu_approximate"`,
  exported as `gelu_new`. Other activations raise.
- `tie_word_embeddings` (`transformers`' default: false, as in every
  Pythia) is the backbone's option of that name: untied, `embed_out.weight`
  is the output projection `token_embedding/reverse_embeddings`; tied, a
  stored `embed_out` is skipped.
- `rotary_pct` / `partial_rotary_factor` and `rotary_emb_base` /
  `rope_theta` (or v5's `rope_parameters`) are `rotary_percentage` and
  `rotary_max_wavelength`; RoPE scaling raises. `layer_norm_eps` is
  `layer_norm_epsilon`.
- `use_parallel_residual=false` (sequential blocks) and
  `attention_bias=false` raise: the backbone has parallel residuals and
  attention biases, as every Pythia.

keras-hub has no Hugging Face loader for GPT-NeoX: the tests write
checkpoints from keras-hub's `GPTNeoXBackbone` with `transformers`' names
and layouts and compare against that model, and (for the options keras-hub
lacks) against our backbone built with them
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
from keras_nlp.saving.huggingface.fields import read_sizes
from keras_nlp.saving.huggingface.fields import write_sizes

_BLOCK = "transformer_layer_{i}/"
_LAYER = "gpt_neox.layers.{i}."
_TANH_GELU = ("gelu_new", "gelu_fast", "gelu_pytorch_tanh")
# Hugging Face's `hidden_act` of each `hidden_activation`.
_HIDDEN_ACT = {"gelu": "gelu", "gelu_approximate": "gelu_new"}


def _dense(ours, theirs, kernel_ops=KERNEL, bias_ops=()):
    return linear_rows(_BLOCK + ours, _LAYER + theirs, kernel_ops, bias_ops)


def _norm(ours, theirs):
    return layer_norm_rows(_BLOCK + ours, _LAYER + theirs)


WEIGHTS = [
    Weight("token_embedding/embeddings", "gpt_neox.embed_in.weight"),
    # Untied only (`tie_word_embeddings=False`).
    Weight("token_embedding/reverse_embeddings", "embed_out.weight", KERNEL),
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
    # Absent fields take transformers' defaults: exact GELU, untied.
    activation = hf.expect("hidden_act", ("gelu", *_TANH_GELU), default="gelu")
    hf.expect("use_parallel_residual", (True,), default=True)
    hf.expect("attention_bias", (True,), default=True)
    fraction, base = _rope(hf)
    return {
        **read_sizes(hf),
        "dropout": hf.get("hidden_dropout", 0.0),
        "rotary_percentage": fraction,
        "rotary_max_wavelength": base,
        "layer_norm_epsilon": hf.get("layer_norm_eps", 1e-5),
        "max_sequence_length": hf.get("max_position_embeddings", 2048),
        "hidden_activation": (
            "gelu" if activation == "gelu" else "gelu_approximate"
        ),
        "tie_word_embeddings": bool(hf.get("tie_word_embeddings", False)),
    }


def _to_hf(config):
    return {
        **write_sizes(config),
        "hidden_dropout": config["dropout"],
        "attention_dropout": config["dropout"],
        "rotary_pct": config["rotary_percentage"],
        "rotary_emb_base": config["rotary_max_wavelength"],
        "layer_norm_eps": config["layer_norm_epsilon"],
        "max_position_embeddings": config["max_sequence_length"],
        "hidden_act": _HIDDEN_ACT[config["hidden_activation"]],
        "use_parallel_residual": True,
        "attention_bias": True,
        "rope_scaling": None,
        "tie_word_embeddings": config["tie_word_embeddings"],
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
            # The output projection, when tied to the token embedding.
            r"embed_out\.weight",
        ),
        base_prefix="gpt_neox.",
    )
)
