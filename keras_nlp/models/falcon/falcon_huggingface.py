"""Hugging Face `falcon` checkpoints: Falcon-RW, Falcon-7B and 40B/180B.

`transformers`' `FalconConfig` picks a variant with five fields; each maps
to one keyword option of our `FalconBackbone` (its defaults are Falcon-RW):

- `alibi`: ALiBi (true) or a rotary embedding of base `rope_theta`
  (`rotary_max_wavelength`; unscaled RoPE only);
- the key/value heads (`num_key_value_heads`): `new_decoder_architecture`
  reads `num_kv_heads`; otherwise `multi_query` means one, and its absence
  one per query head;
- `parallel_attn` (`parallel_residual`); a parallel block has one
  `input_layernorm` (`shared_layer_norm`), except under
  `new_decoder_architecture` with `num_ln_in_parallel_attn` 2 (the
  default there), which has `ln_attn` and `ln_mlp`;
- `bias` (`use_bias`).

Falcon-RW is `alibi, bias`, neither multi-query nor parallel; Falcon-7B is
`multi_query, parallel_attn`, rotary, no bias; Falcon-40B/180B are
`new_decoder_architecture` with 8 `num_kv_heads`. `transformers` has no
sequential block under `new_decoder_architecture` (it raises), nor
separate key/value heads other than one or all without it: those raise
here, naming the field.

`self_attention.query_key_value` fuses the projections by key/value group
in every variant: its rows are `num_kv_heads` groups, each of the group's
`num_attention_heads // num_kv_heads` query heads, then its key head and
its value head (`head_dim` rows each). With one group that is Falcon-7B's
`[all queries | key | value]`; with one query head per group it is
Falcon-RW's per-head `[query | key | value]` (BLOOM's). Query head `n`
belongs to group `n // (heads // kv_heads)`, which is how our attention
shares key/value heads too.

keras-hub has no Hugging Face loader for Falcon and only Falcon-RW's
architecture: the tests write checkpoints with `transformers`' names and
layouts (`tests/saving/test_huggingface_falcon.py`).
"""

from keras_nlp.models.gpt_neo_x.gpt_neo_x_huggingface import one_of
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Merge
from keras_nlp.saving.huggingface import Split
from keras_nlp.saving.huggingface import Transpose
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import layer_norm_rows
from keras_nlp.saving.huggingface import linear_rows
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface.fields import read_rope
from keras_nlp.saving.huggingface.fields import write_rope

_BLOCK = "transformer_layer_{i}/"
_LAYER = "transformer.h.{i}."
# transformers' defaults (Falcon 7B's), for fields a config leaves out.
_DEFAULTS = {
    "alibi": False,
    "new_decoder_architecture": False,
    "multi_query": True,
    "parallel_attn": True,
    "bias": False,
}


def grouped_qkv(attention, theirs, num_heads, num_kv_heads, head_dim, bias):
    """Rows for the `(hidden, heads, head_dim)` query and `(hidden,
    kv_heads, head_dim)` key and value kernels (and `(heads, head_dim)`
    biases when `bias`) under `attention` (our path, with `{i}`) that are
    Falcon's fused `theirs` (`.weight`, `.bias`): per key/value group, the
    group's query heads, its key head and its value head.

    Each is one slice of the view `(kv_heads, (group + 2) * head_dim, ...)`
    of that tensor, so a device reads only the rows of its heads.
    """
    group = num_heads // num_kv_heads
    width = (group + 2) * head_dim
    hidden = num_heads * head_dim
    # Our query heads `(heads, ...)` as `(kv_heads, group * head_dim, ...)`.
    grouped = ()
    if group > 1:
        grouped = (Split(0, (num_kv_heads, group)), Merge(1))
    rows = []
    for name, start in (
        ("query_dense", 0),
        ("key_dense", group * head_dim),
        ("value_dense", (group + 1) * head_dim),
    ):
        group_ops = grouped if name == "query_dense" else ()
        rows.append(
            Weight(
                attention + name + "/kernel",
                theirs + ".weight",
                # (hidden, heads, head_dim) -> (heads, head_dim, hidden).
                (Transpose((1, 2, 0)), *group_ops),
                part=(1, start),
                view=(num_kv_heads, width, hidden),
                view_ops=(Merge(0),),
            )
        )
        if bias:
            rows.append(
                Weight(
                    attention + name + "/bias",
                    theirs + ".bias",
                    group_ops,
                    part=(1, start),
                    view=(num_kv_heads, width),
                    view_ops=(Merge(0),),
                )
            )
    return rows


def _weights(config):
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    bias = config.get("use_bias", True)
    parallel = config.get("parallel_residual", False)
    shared = config.get("shared_layer_norm", False)
    # Our norms have the checkpoints' names.
    if not parallel:
        norms = ("input_layernorm", "post_attention_layernorm")
    elif shared:
        norms = ("input_layernorm",)
    else:
        norms = ("ln_attn", "ln_mlp")

    def linear(ours, theirs):
        rows = linear_rows(_BLOCK + ours, _LAYER + theirs, KERNEL)
        return [row for row in rows if bias or not row.ours.endswith("bias")]

    return [
        Weight(
            "token_embedding/embeddings", "transformer.word_embeddings.weight"
        ),
        *grouped_qkv(
            _BLOCK + "attention/",
            _LAYER + "self_attention.query_key_value",
            heads,
            kv_heads,
            config["hidden_dim"] // heads,
            bias,
        ),
        *linear("attention/output_dense", "self_attention.dense"),
        *[
            row
            for norm in norms
            for row in layer_norm_rows(_BLOCK + norm, _LAYER + norm)
        ],
        *linear("dense_h_to_4h", "mlp.dense_h_to_4h"),
        *linear("dense_4h_to_h", "mlp.dense_4h_to_h"),
        *layer_norm_rows("final_layernorm", "transformer.ln_f"),
    ]


def _variant(hf, heads):
    """`(key/value heads, parallel, shared norm)` of the config's fields."""
    new = hf.get(
        "new_decoder_architecture", _DEFAULTS["new_decoder_architecture"]
    )
    multi_query = hf.get("multi_query", _DEFAULTS["multi_query"])
    parallel = hf.get("parallel_attn", _DEFAULTS["parallel_attn"])
    given_kv = hf.get("num_kv_heads")
    norms = hf.get("num_ln_in_parallel_attn")
    if new:
        if not parallel:
            hf.unsupported(
                "parallel_attn",
                parallel,
                [True],
                why=(
                    " with new_decoder_architecture=True (transformers' "
                    "blocks are parallel there)"
                ),
            )
        if norms not in (None, 1, 2):
            hf.unsupported("num_ln_in_parallel_attn", norms, [1, 2])
        return given_kv or heads, True, norms == 1
    if parallel and norms not in (None, 1):
        hf.unsupported(
            "num_ln_in_parallel_attn",
            norms,
            [1],
            why=(
                " without new_decoder_architecture (transformers' parallel "
                "blocks have one input_layernorm there)"
            ),
        )
    if multi_query:
        # transformers reads num_kv_heads only without multi_query.
        return 1, parallel, parallel
    if given_kv not in (None, heads):
        hf.unsupported(
            "num_kv_heads",
            given_kv,
            [heads],
            why=(
                " (one per query head without multi_query and "
                "new_decoder_architecture)"
            ),
        )
    return heads, parallel, parallel


def _from_hf(hf):
    hidden = hf.require("hidden_size")
    heads = one_of(hf, ("num_attention_heads", "n_head"), None)
    layers = one_of(hf, ("num_hidden_layers", "n_layer"), None)
    for name, value in (
        ("num_attention_heads", heads),
        ("num_hidden_layers", layers),
    ):
        if value is None:
            hf.require(name)
    head_dim = hf.get("head_dim")
    if head_dim is not None and head_dim != hidden // heads:
        hf.unsupported("head_dim", head_dim, [hidden // heads])
    kv_heads, parallel, shared = _variant(hf, heads)
    if heads % kv_heads:
        hf.unsupported(
            "num_kv_heads",
            kv_heads,
            why=f" (must divide num_attention_heads={heads})",
        )
    wavelength = None
    if not hf.get("alibi", _DEFAULTS["alibi"]):
        wavelength, _, _ = read_rope(hf, supported=("default",))
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
        "num_key_value_heads": None if kv_heads == heads else kv_heads,
        "rotary_max_wavelength": wavelength,
        "parallel_residual": parallel,
        "shared_layer_norm": shared,
        "use_bias": hf.get("bias", _DEFAULTS["bias"]),
    }


def _to_hf(config):
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    parallel = config.get("parallel_residual", False)
    shared = config.get("shared_layer_norm", False)
    wavelength = config.get("rotary_max_wavelength")
    # Without new_decoder_architecture, transformers has one or all
    # key/value heads and parallel blocks with one norm.
    new = parallel and (not shared or kv_heads not in (1, heads))
    if not parallel and kv_heads not in (1, heads):
        raise ValueError(
            "Hugging Face's Falcon has no sequential block with "
            f"num_key_value_heads={kv_heads} (other than 1 or "
            f"num_attention_heads={heads}): grouped key/value heads need "
            "parallel_residual=True."
        )
    fields = {
        "vocab_size": config["vocabulary_size"],
        "num_hidden_layers": config["num_layers"],
        "num_attention_heads": heads,
        "num_kv_heads": kv_heads,
        "hidden_size": config["hidden_dim"],
        "ffn_hidden_size": config["intermediate_dim"],
        "layer_norm_epsilon": config["layer_norm_epsilon"],
        "attention_dropout": config["attention_dropout_rate"],
        "hidden_dropout": config["feedforward_dropout_rate"],
        "activation": "gelu",
        "tie_word_embeddings": True,
        "alibi": wavelength is None,
        "bias": config.get("use_bias", True),
        "parallel_attn": parallel,
        "new_decoder_architecture": new,
        # Falcon 40B/180B's configs say multi_query too (unread there).
        "multi_query": new or kv_heads == 1,
    }
    if new:
        fields["num_ln_in_parallel_attn"] = 1 if shared else 2
    if wavelength is not None:
        fields.update(write_rope(wavelength))
    return fields


FALCON = register_family(
    HuggingFaceFamily(
        model_type="falcon",
        backbone="FalconBackbone",
        architectures=("FalconForCausalLM",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=_weights,
        ignored_fields=(
            # Only bounds positions; neither ALiBi nor RoPE has a table.
            "max_position_embeddings",
            # Rotary settings, unused with ALiBi (read with rotary).
            "rope_theta",
            "rope_scaling",
            "rope_parameters",
            # Falcon-RW's remote-code field; transformers' Falcon never
            # reads it.
            "apply_residual_connection_post_layernorm",
        ),
        ignorable_tensors=(r"lm_head\.weight",),
        base_prefix="transformer.",
    )
)
