"""What `keras.Model.quantize` quantizes, described without the layers.

Planning a quantized model needs each quantizable layer's kernels and
equation; a plan made from a config (a quantized preset, `plan --dtype
int4`) has no live model, so the abstract build records these
descriptions beside its variables, and `Backbone.quantize` makes the same
ones from its live layers.
"""

import dataclasses
import re

import keras

QUANTIZED_DTYPES = ("int8", "int4", "float8")


@dataclasses.dataclass(frozen=True)
class QuantizableLayer:
    """A leaf `Dense`, `EinsumDense` or `Embedding` that Keras quantizes.

    Attributes:
        path: the layer's path (the key of a `DTypePolicyMap`).
        name: its name (what Keras's regex filters search).
        embedding: whether it is an `Embedding` (float8 leaves those).
        kernels: `(variable path, variable name, kind)` of each weight
            quantized: kind "dense" (outputs last), "einsum", "embeddings"
            (vocabulary first) or "reverse" (an untied reverse embedding,
            `(hidden, vocabulary)`).
        equation: an `EinsumDense`'s equation.
        anchor: the path of its last variable; new variables follow it.
        mode: the quantization mode it already has, if any.
    """

    path: str
    name: str
    embedding: bool
    kernels: tuple
    equation: str = None
    anchor: str = None
    mode: str = None


def stored_variable(layer, name):
    """`layer`'s variable `name`: the variable behind a property that
    returns a computed value (LoRA's merged `kernel`, an int4 layer's
    unpacked `kernel` or `embeddings`), or `None`."""
    for attribute in (f"_{name}", name):
        variable = getattr(layer, attribute, None)
        if isinstance(variable, keras.Variable):
            return variable
    return None


def describe_layer(layer):
    """The `QuantizableLayer` of `layer`, or `None` if Keras would not
    quantize it (not a leaf `Dense`, `EinsumDense` or `Embedding`)."""
    if not isinstance(
        layer,
        (keras.layers.Dense, keras.layers.EinsumDense, keras.layers.Embedding),
    ):
        return None
    if len(list(layer._flatten_layers())) != 1 or not layer.built:
        return None
    equation = None
    if isinstance(layer, keras.layers.EinsumDense):
        equation = layer.equation
        kernels = ((stored_variable(layer, "kernel").path, "kernel", "einsum"),)
    elif isinstance(layer, keras.layers.Dense):
        kernels = ((stored_variable(layer, "kernel").path, "kernel", "dense"),)
    else:
        embeddings = stored_variable(layer, "embeddings")
        kernels = ((embeddings.path, "embeddings", "embeddings"),)
        reverse = stored_variable(layer, "reverse_embeddings")
        if reverse is not None and not getattr(layer, "tie_weights", True):
            kernels += ((reverse.path, "reverse_embeddings", "reverse"),)
    return QuantizableLayer(
        path=layer.path,
        name=layer.name,
        embedding=isinstance(layer, keras.layers.Embedding),
        kernels=kernels,
        equation=equation,
        anchor=layer.variables[-1].path if layer.variables else None,
        mode=getattr(layer, "quantization_mode", None),
    )


def describe_quantizable(model):
    """The `QuantizableLayer`s of `model`, in `_flatten_layers` order."""
    found = (describe_layer(layer) for layer in model._flatten_layers())
    return tuple(d for d in found if d is not None)


def quantized_by_keras(description, mode, filters, layer=None):
    """Whether `keras.Model.quantize(mode, filters=filters)` quantizes the
    described layer: not quantized yet, not an embedding for float8, and
    named by a regex filter (Keras searches names) or accepted by a
    callable one (given the live `layer`)."""
    if description.mode is not None:
        return False
    if mode == "float8" and description.embedding:
        return False
    if filters is None:
        return True
    if callable(filters):
        return bool(filters(layer))
    patterns = [filters] if isinstance(filters, str) else list(filters)
    return any(re.search(pattern, description.name) for pattern in patterns)


def quantized_policies(config):
    """`(float config, policy map or None)` of a backbone config.

    A quantized backbone's config (as `get_config` writes it, and
    keras-hub's quantized presets hold it) has a `DTypePolicyMap` for
    `dtype`, serialized or not: quantized policies by layer path (or
    regex), and the default policy for the rest (Keras's global one when
    none is stored), which the float config has instead.
    """
    dtype = config.get("dtype")
    if isinstance(dtype, dict) and dtype.get("class_name") == "DTypePolicyMap":
        dtype = keras.dtype_policies.deserialize(dtype)
    if not isinstance(dtype, keras.dtype_policies.DTypePolicyMap):
        return config, None
    return {**config, "dtype": dtype.default_policy.name}, dtype


def layer_policy(policy_map, description):
    """The quantized policy `policy_map` gives the described layer, or
    `None` when it stays in float."""
    policy = policy_map[description.path]
    if getattr(policy, "quantization_mode", None) in QUANTIZED_DTYPES:
        return policy
    return None


def parse_quantized_dtype(name):
    """`(mode, int4 block size, float dtype)` of a quantized dtype name.

    `"int8"`, `"int4"` (groups of 128 rows), `"int4/64"`, `"int4/-1"`
    (one scale per channel) and `"float8"` quantize the model as it is;
    Keras's policy names (`"int8_from_bfloat16"`, `"int4/128_from_float32"`)
    name the float dtype too. Anything else is not quantized: `(None,
    None, name)`.
    """
    if not isinstance(name, str):
        return None, None, name
    quantized, _, source = name.partition("_from_")
    mode, _, block = quantized.partition("/")
    if mode not in QUANTIZED_DTYPES:
        return None, None, name
    if block and (mode != "int4" or not block.lstrip("-").isdigit()):
        raise ValueError(
            f"{name!r}: only int4 takes a group size ('int4/128', or "
            "'int4/-1' for one scale per channel)."
        )
    block_size = int(block) if block else 128
    return mode, (None if block_size == -1 else block_size), source or None
