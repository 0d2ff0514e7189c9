"""What each Hugging Face config value may be, checked as it is read.

Every value a family reads through `HuggingFaceConfig` (`get`, `require`,
`expect`) is checked against the kind its field name has in `FIELD_KINDS`
before anything is built: sizes are integers (a bool is not one) within a
bound, epsilons and RoPE bases finite and positive, dropout rates in
`[0, 1)`, flags booleans, `torch_dtype` / `dtype` a dtype name, and the
numbers inside `rope_scaling` / `rope_parameters` likewise. A bad value
raises a one-line `PresetError` naming the field, the value and what is
valid, instead of a `TypeError` or `ZeroDivisionError` from deep inside a
family's translation, or a model of NaNs.

The bounds are far above every published checkpoint (the deepest has 126
layers, the widest vocabulary 262,144 tokens, the longest context about
10M positions, the most experts 384): they stop a config that would build
a model no checkpoint holds before a single layer is made, also where no
weights are read (`load_weights=False`, the `plan` command).
"""

import math
import re
import string

from keras_nlp.saving.preset_files import PresetError

MAX_LAYERS = 256
"""Layers (and ALBERT's groups and repetitions) a config may ask for."""
MAX_SIZE = 2**20
"""Widths, head counts and vocabularies a config may ask for."""
MAX_POSITIONS = 2**24
"""`max_position_embeddings` and its relatives."""
MAX_EXPERTS = 4096
"""Experts per mixture-of-experts block."""
DTYPES = ("float32", "float16", "bfloat16", "float64")
"""The `torch_dtype` / `dtype` values a loadable checkpoint has."""


class Kind:
    """What a value may be: `test(value) -> bool`, described by `what`."""

    def __init__(self, what, test):
        self.what = what
        self.test = test


def _integer(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _counted(value):
    return _integer(value) and value > 0


def _number(value):
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def integers(low, high):
    """Integers in `[low, high]`."""
    what = (
        f"a positive integer at most {high}"
        if low == 1
        else f"an integer from {low} to {high}"
    )
    return Kind(what, lambda v: _integer(v) and low <= v <= high)


LAYERS = integers(1, MAX_LAYERS)
SIZE = integers(1, MAX_SIZE)
POSITIONS = integers(1, MAX_POSITIONS)
EXPERTS = integers(1, MAX_EXPERTS)
COUNT = integers(0, MAX_SIZE)
WINDOW = integers(0, MAX_POSITIONS)
POSITIVE = Kind("a finite number above 0", lambda v: _number(v) and v > 0)
NON_NEGATIVE = Kind("a finite number >= 0", lambda v: _number(v) and v >= 0)
RATE = Kind("a number in [0, 1)", lambda v: _number(v) and 0 <= v < 1)
FRACTION = Kind("a number in (0, 1]", lambda v: _number(v) and 0 < v <= 1)
BOOL = Kind("true or false", lambda v: isinstance(v, bool))
STRING = Kind("a string", lambda v: isinstance(v, str))
OBJECT = Kind("a JSON object", lambda v: isinstance(v, dict))
STRINGS = Kind(
    "a list of strings",
    lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v),
)
LAYER_INDICES = Kind(
    f"a list of integers from 0 to {MAX_LAYERS - 1}",
    lambda v: (
        isinstance(v, list)
        and all(_integer(i) and 0 <= i < MAX_LAYERS for i in v)
    ),
)
POSITIVE_LIST = Kind(
    "a list of finite numbers above 0",
    lambda v: isinstance(v, list) and all(_number(f) and f > 0 for f in v),
)
DTYPE = Kind(
    f"one of {', '.join(repr(d) for d in DTYPES)}",
    lambda v: isinstance(v, str) and v in DTYPES,
)
ROPE = Kind("a JSON object (or null)", lambda v: isinstance(v, dict))


def _table(*groups):
    table = {}
    for kind, names in groups:
        for name in names:
            table[name] = kind
    return table


FIELD_KINDS = _table(
    (
        LAYERS,
        (
            "num_hidden_layers",
            "n_layer",
            "n_layers",
            "encoder_layers",
            "decoder_layers",
            "num_hidden_groups",
            "inner_group_num",
            "decoder_sparse_step",
        ),
    ),
    (
        SIZE,
        (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_attention_heads",
            "num_key_value_heads",
            "num_kv_heads",
            "head_dim",
            "d_model",
            "encoder_attention_heads",
            "decoder_attention_heads",
            "encoder_ffn_dim",
            "decoder_ffn_dim",
            "n_embd",
            "n_head",
            "n_heads",
            "n_inner",
            "dim",
            "hidden_dim",
            "ffn_dim",
            "ffn_hidden_size",
            "embedding_size",
            "word_embed_proj_dim",
            "type_vocab_size",
            "moe_intermediate_size",
            "shared_expert_intermediate_size",
            "num_ln_in_parallel_attn",
            "sliding_window_size",
            "image_size",
            "patch_size",
            "num_channels",
            "projection_dim",
            "num_image_tokens",
            "mm_tokens_per_image",
        ),
    ),
    (
        POSITIONS,
        (
            "max_position_embeddings",
            "original_max_position_embeddings",
            "n_positions",
            "n_ctx",
        ),
    ),
    (
        EXPERTS,
        (
            "num_experts",
            "num_local_experts",
            "num_experts_per_tok",
            "experts_per_token",
        ),
    ),
    # Qwen 2 MoE (transformers 5) writes `sliding_window: 0` for none.
    (WINDOW, ("sliding_window",)),
    (COUNT, ("max_window_layers",)),
    (
        POSITIVE,
        (
            "rms_norm_eps",
            "layer_norm_eps",
            "layer_norm_epsilon",
            "rope_theta",
            "rope_local_base_freq",
            "rotary_emb_base",
            "query_pre_attn_scalar",
            "attn_logit_softcapping",
            "final_logit_softcapping",
            "swiglu_alpha",
            "swiglu_limit",
        ),
    ),
    (NON_NEGATIVE, ("router_aux_loss_coef", "router_jitter_noise")),
    (
        RATE,
        (
            "dropout",
            "attention_dropout",
            "activation_dropout",
            "hidden_dropout",
            "hidden_dropout_prob",
            "attention_probs_dropout_prob",
            "resid_pdrop",
            "embd_pdrop",
            "attn_pdrop",
        ),
    ),
    (FRACTION, ("partial_rotary_factor", "rotary_pct")),
    (
        BOOL,
        (
            "tie_word_embeddings",
            "attention_bias",
            "mlp_bias",
            "qkv_bias",
            "bias",
            "enable_bias",
            "use_sliding_window",
            "alibi",
            "multi_query",
            "parallel_attn",
            "new_decoder_architecture",
            "scale_embedding",
            "sinusoidal_pos_embds",
            "is_decoder",
            "add_cross_attention",
            "use_parallel_residual",
            "norm_topk_prob",
            "layer_norm_elementwise_affine",
            "scale_attn_weights",
            "scale_attn_by_inverse_layer_idx",
            "use_bidirectional_attention",
            "vision_use_head",
            "apply_residual_connection_post_layernorm",
            "do_layer_norm_before",
        ),
    ),
    (
        STRING,
        (
            "hidden_act",
            "hidden_activation",
            "activation",
            "activation_function",
            "position_embedding_type",
        ),
    ),
    (STRINGS, ("layer_types",)),
    (LAYER_INDICES, ("mlp_only_layers",)),
    (DTYPE, ("torch_dtype", "dtype")),
    (ROPE, ("rope_scaling", "rope_parameters")),
    (OBJECT, ("quantization_config", "text_config", "vision_config")),
)
"""The kind of each config field that any family reads; a field not named
here is checked by the family that reads it."""

ROPE_KINDS = {
    "rope_type": STRING,
    "type": STRING,
    "rope_theta": POSITIVE,
    "factor": POSITIVE,
    "low_freq_factor": POSITIVE,
    "high_freq_factor": POSITIVE,
    "original_max_position_embeddings": POSITIONS,
    "attention_factor": POSITIVE,
    "beta_fast": POSITIVE,
    "beta_slow": POSITIVE,
    "mscale": NON_NEGATIVE,
    "mscale_all_dim": NON_NEGATIVE,
    "partial_rotary_factor": FRACTION,
    "truncate": BOOL,
    "short_factor": POSITIVE_LIST,
    "long_factor": POSITIVE_LIST,
}
"""The kinds of the values inside a RoPE object (any other key is left to
the family, which refuses keys it does not understand)."""


def _shown(value):
    """`repr(value)`, cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def refuse(path, key, value, what):
    """Raises: `key` has `value`, which is not `what`."""
    raise PresetError(
        f"{path}: {key}={_shown(value)} is not a valid value; it must be "
        f"{what}."
    )


def check_value(path, key, value, kind):
    """Raises naming `key` unless `value` is of `kind`."""
    if not kind.test(value):
        refuse(path, key, value, kind.what)
    if kind is ROPE:
        _check_rope(path, key, value)


def _check_rope(path, key, rope):
    """The values of a RoPE object; one nested per layer type too
    (Gemma 3's `{"full_attention": {...}, "sliding_attention": {...}}`)."""
    for name, value in rope.items():
        if isinstance(value, dict) and name.endswith("_attention"):
            _check_rope(path, f"{key}.{name}", value)
            continue
        kind = ROPE_KINDS.get(name)
        if kind is not None and value is not None:
            check_value(path, f"{key}.{name}", value, kind)


def check_field(path, key, value):
    """Raises naming `key` when its (non-null) `value` is not of the kind
    `FIELD_KINDS` gives its name."""
    kind = FIELD_KINDS.get(key)
    if kind is not None and value is not None:
        check_value(path, key, value, kind)


# Pairs of a width and a head count whose heads must split the width
# when the model derives its head size from them (no `head_dim`).
HEAD_SPLITS = (
    ("hidden_size", "num_attention_heads"),
    ("hidden_size", "n_head"),
    ("n_embd", "n_head"),
    ("dim", "n_heads"),
    ("d_model", "encoder_attention_heads"),
    ("d_model", "decoder_attention_heads"),
)


def check_heads(path, data, derived_head_dim):
    """Raises when the heads of `data` (checked values) do not fit:
    key/value heads must divide the query heads, and where the head size
    is derived (`derived_head_dim`) the heads must split the width."""
    heads = data.get("num_attention_heads")
    groups = data.get("num_key_value_heads")
    if _counted(heads) and _counted(groups) and heads % groups:
        refuse(
            path,
            "num_key_value_heads",
            groups,
            f"a divisor of num_attention_heads={heads}",
        )
    if not derived_head_dim:
        return
    for width_field, heads_field in HEAD_SPLITS:
        width, count = data.get(width_field), data.get(heads_field)
        if _counted(width) and _counted(count) and width % count:
            refuse(
                path,
                heads_field,
                count,
                f"a divisor of {width_field}={width} (the head size is "
                f"{width_field} // {heads_field}; no head_dim is given)",
            )


# The fields of a tensor table's names counted by our arguments: each is
# `(argument, config fields that may give it)`.
COUNTED_FIELDS = {
    "i": (
        "num_layers",
        (
            "num_hidden_layers",
            "n_layer",
            "n_layers",
            "encoder_layers",
            "decoder_layers",
        ),
    ),
    "e": ("num_experts", ("num_experts", "num_local_experts")),
}
_DIGITS = re.compile(r"\d+")


def _name_shape(template):
    """`(key, slots)` of a table name: the name with every index and
    every run of digits as `#`, and `(field, position among the #s)`."""
    key, slots, count = [], [], 0
    for literal, field, _, _ in string.Formatter().parse(template):
        key.append(_DIGITS.sub("#", literal))
        count += len(_DIGITS.findall(literal))
        if field is not None:
            key.append("#")
            slots.append((field, count))
            count += 1
    return "".join(key), slots


def header_counts(table, prefix, names):
    """`{field: count}` of `COUNTED_FIELDS` seen in the tensor `names` of
    a checkpoint: one more than the largest index of the field in any name
    that a row of `table` (with or without the base model's `prefix`)
    spells."""
    shapes = {}
    for row in table:
        key, slots = _name_shape(row.theirs)
        slots = [s for s in slots if s[0] in COUNTED_FIELDS]
        if not slots:
            continue
        shapes[key] = slots
        if prefix and row.theirs.startswith(prefix):
            shapes[_name_shape(row.theirs[len(prefix) :])[0]] = slots
    counts = {}
    for name in names:
        slots = shapes.get(_DIGITS.sub("#", name))
        if not slots:
            continue
        digits = _DIGITS.findall(name)
        for field, position in slots:
            count = int(digits[position]) + 1
            counts[field] = max(counts.get(field, 0), count)
    return counts


def check_header_counts(path, family, config, data, names):
    """Raises when `config` (our arguments, translated from the
    `config.json` `data` at `path`) asks for more layers or experts than
    the checkpoint's tensor `names` hold: read from the headers, before
    any layer is built, so a config that says 1,000 layers over a 2-layer
    checkpoint fails at once."""
    counts = header_counts(family.table(config), family.base_prefix, names)
    for field, (argument, fields) in COUNTED_FIELDS.items():
        wanted, held = config.get(argument), counts.get(field)
        if not _counted(wanted) or held is None or wanted <= held:
            continue
        nested = data.get("text_config")
        sources = [(f, data) for f in fields]
        if isinstance(nested, dict):
            sources += [(f"text_config.{f}", nested) for f in fields]
        named = next(
            (f for f, d in sources if d.get(f.rsplit(".")[-1]) == wanted),
            fields[0],
        )
        what = "layers" if field == "i" else "experts per block"
        refuse(
            path,
            named,
            wanted,
            f"at most the {held} {what} the checkpoint's tensors hold",
        )
