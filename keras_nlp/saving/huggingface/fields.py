"""Config idioms many Hugging Face families share: RoPE and sliding windows.

`transformers` spells RoPE two ways: `rope_theta` and `rope_scaling`
(`{"rope_type" or "type": ..., "factor": ...}`) up to v4, and one
`rope_parameters` dict holding `rope_theta` and `rope_type` (and the
`partial_rotary_factor` of config classes that have one) from v5; both
are read. The values inside are checked as the top-level fields are
(`field_checks.ROPE_KINDS`).

Windows are `sliding_window` plus, for Qwen, `use_sliding_window` and
`max_window_layers` (layers at or above it are windowed), or a per-layer
`layer_types` list.
"""

# The keys of each RoPE type that we translate (besides the type and theta).
ROPE_KEYS = {
    "default": (),
    "linear": ("factor",),
    "llama3": (
        "factor",
        "low_freq_factor",
        "high_freq_factor",
        "original_max_position_embeddings",
    ),
}


def read_sizes(hf, grouped=False):
    """The sizes most families spell alike, as our arguments.

    All are required but `num_key_value_heads`: `vocabulary_size`,
    `num_layers`, `hidden_dim`, `intermediate_dim`, and the heads:
    `num_heads`, or with `grouped` `num_query_heads` and
    `num_key_value_heads` (absent: one per query head).
    """
    heads = hf.require("num_attention_heads")
    sizes = {
        "vocabulary_size": hf.require("vocab_size"),
        "num_layers": hf.require("num_hidden_layers"),
        "hidden_dim": hf.require("hidden_size"),
        "intermediate_dim": hf.require("intermediate_size"),
    }
    if not grouped:
        return {**sizes, "num_heads": heads}
    return {
        **sizes,
        "num_query_heads": heads,
        "num_key_value_heads": hf.get("num_key_value_heads", heads),
    }


def write_sizes(config, grouped=False):
    """`config.json` fields of what `read_sizes` reads."""
    fields = {
        "vocab_size": config["vocabulary_size"],
        "num_hidden_layers": config["num_layers"],
        "hidden_size": config["hidden_dim"],
        "intermediate_size": config["intermediate_dim"],
    }
    if not grouped:
        return {**fields, "num_attention_heads": config["num_heads"]}
    return {
        **fields,
        "num_attention_heads": config["num_query_heads"],
        "num_key_value_heads": config["num_key_value_heads"],
    }


def read_rope(hf, supported=("default", "linear"), default_theta=10000.0):
    """Reads the RoPE fields of a config.

    Args:
        hf: the `HuggingFaceConfig`.
        supported: the RoPE types the backbone has (keys of `ROPE_KEYS`).
        default_theta: the base when the config has none.

    Returns:
        `(theta, rope_type, parameters)`: the base, the type (`"default"`
        when unscaled) and a dict of the type's `ROPE_KEYS`.

    Raises:
        PresetError naming the field: an unsupported type, or keys of the
        type's dict that are not understood.
    """
    parameters = hf.get("rope_parameters")
    scaling = hf.get("rope_scaling")
    theta = hf.get("rope_theta")
    field, rope = "rope_scaling", scaling
    if parameters is not None:
        field, rope = "rope_parameters", parameters
        if scaling is not None:
            hf.unsupported(
                "rope_scaling",
                scaling,
                why=" next to rope_parameters (which one holds?)",
            )
    if rope is not None and not isinstance(rope, dict):
        hf.unsupported(field, rope, why=" (expected an object)")
    rope = dict(rope or {})
    theta = rope.pop("rope_theta", theta)
    kind = rope.pop("rope_type", None)
    legacy = rope.pop("type", None)
    kind = kind or legacy or "default"
    check_full_rotation(hf, field, rope)
    if kind not in supported:
        hf.unsupported(f"{field}.rope_type", kind, supported)
    unknown = sorted(set(rope) - set(ROPE_KEYS[kind]))
    if unknown:
        hf.unsupported(
            field,
            {**rope, "rope_type": kind},
            why=f" (keys {unknown} are not understood for {kind!r} RoPE)",
        )
    missing = [key for key in ROPE_KEYS[kind] if rope.get(key) is None]
    if missing:
        hf.unsupported(
            field, {**rope, "rope_type": kind}, why=f" (it lacks {missing})"
        )
    return (
        default_theta if theta is None else theta,
        kind,
        {key: rope[key] for key in ROPE_KEYS[kind]},
    )


def check_full_rotation(hf, field, rope):
    """Pops `partial_rotary_factor` from the RoPE dict `rope` (of `field`):
    transformers 5 writes it there for every config class that has one;
    1 (every feature rotates, what our backbones build) is understood,
    another fraction raises naming it."""
    fraction = rope.pop("partial_rotary_factor", None)
    if fraction is not None and fraction != 1:
        hf.unsupported(
            f"{field}.partial_rotary_factor",
            fraction,
            [1.0],
            why=" (every feature of a head rotates)",
        )


def write_rope(theta, kind="default", parameters=None):
    """`config.json` fields for RoPE (v4 spelling, read by keras-hub too)."""
    fields = {"rope_theta": theta}
    if kind != "default":
        fields["rope_scaling"] = {"rope_type": kind, **(parameters or {})}
    return fields


def read_linear_rope(hf):
    """`rope_max_wavelength` and `rope_scaling_factor` (1 when unscaled)
    from a config's default or linear RoPE."""
    theta, _, rope = read_rope(hf, ("default", "linear"))
    return {
        "rope_max_wavelength": theta,
        "rope_scaling_factor": rope.get("factor", 1.0),
    }


def write_linear_rope(config):
    """`config.json` fields of what `read_linear_rope` reads."""
    factor = config["rope_scaling_factor"]
    if factor == 1.0:
        return write_rope(config["rope_max_wavelength"])
    return write_rope(
        config["rope_max_wavelength"], "linear", {"factor": factor}
    )


def whole_as_int(value):
    """`value`, a whole float as an int: transformers 5's strict configs
    type scalars such as `query_pre_attn_scalar` as int, and refuse `256.0`
    where `256` loads."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def write_head_dim(config):
    """`head_dim`: the backbone's, or `hidden_dim // num_query_heads` where
    it has none."""
    head_dim = config["head_dim"]
    if head_dim is None:
        return config["hidden_dim"] // config["num_query_heads"]
    return head_dim


LAYER_TYPES = ("sliding_attention", "full_attention")
"""The values of Hugging Face's `layer_types`."""


def windowed_layers(hf, num_layers, default):
    """Which layers `layer_types` windows, one bool per layer.

    Args:
        hf: the `HuggingFaceConfig`.
        num_layers: the number of layers.
        default: `index -> windowed`, the family's pattern when the config
            has no `layer_types`.

    Raises:
        PresetError naming `layer_types` when it is not a list of
        `num_layers` of `LAYER_TYPES`.
    """
    types = hf.get("layer_types")
    if types is None:
        return [default(i) for i in range(num_layers)]
    if (
        not isinstance(types, list)
        or len(types) != num_layers
        or not set(types) <= set(LAYER_TYPES)
    ):
        hf.unsupported(
            "layer_types",
            types,
            why=f" (expected a list of {num_layers} of {LAYER_TYPES})",
        )
    return [t == "sliding_attention" for t in types]


def read_window(hf, num_layers, layered=True):
    """Reads a sliding window applied to every layer, or none.

    Args:
        hf: the `HuggingFaceConfig`.
        num_layers: the number of layers.
        layered: whether the family has `use_sliding_window`,
            `max_window_layers` and `layer_types` (Qwen); Mistral's window
            is `sliding_window` alone.

    Returns:
        The window in tokens (the query's own included), or None.

    Raises:
        PresetError naming the fields when only some layers are windowed,
        which our backbones (a window on every layer or none) cannot build.
    """
    window = hf.get("sliding_window")
    if not layered:
        return window
    use = hf.get("use_sliding_window", False)
    first = hf.get("max_window_layers", 0)
    types = hf.get("layer_types")
    windowed = windowed_layers(
        hf, num_layers, lambda i: use and window is not None and i >= first
    )
    if any(windowed) and window is None:
        hf.unsupported("layer_types", types, why=" (no sliding_window size)")
    if all(windowed) and num_layers:
        return window
    if not any(windowed):
        return None
    hf.unsupported(
        "max_window_layers" if types is None else "layer_types",
        first if types is None else types,
        why=(
            f" (a sliding window on {sum(windowed)} of {num_layers} layers; "
            "only all or none are supported)"
        ),
    )


def write_window(window, num_layers, default_size):
    """Qwen's window fields for a window on every layer (or none)."""
    return {
        "use_sliding_window": window is not None,
        "sliding_window": default_size if window is None else window,
        "max_window_layers": num_layers if window is None else 0,
        "layer_types": [
            "full_attention" if window is None else "sliding_attention"
        ]
        * num_layers,
    }
