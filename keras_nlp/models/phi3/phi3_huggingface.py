"""Hugging Face `phi3` checkpoints (Phi-3 mini and medium, 4k and 128k).

Llama's names, with two fused tensors: `self_attn.qkv_proj` stacks the
query, key and value projections (rows `[q | k | v]`, `num_attention_heads`
then twice `num_key_value_heads` heads) and `mlp.gate_up_proj` the gate
then the up projection. The 128k models' `rope_scaling` type `"longrope"`
(formerly `"su"`) is our `rope_scaling_type="su"`: `max_position_embeddings`
and `original_max_position_embeddings` become `max_sequence_length` and
`pretraining_sequence_length`, which choose the short or long factors and
the cosine amplitude as `transformers` does. transformers 5 writes these
into one `rope_parameters` dict, with `rope_theta` and
`partial_rotary_factor` (1.0): read as well.

`sliding_window` (Phi-3 mini 4k: 2047), which `transformers` applies on
every layer, is the backbone's `sliding_window`, with the same width: a
query attends to the keys `j` with `i - sliding_window < j <= i` (Mistral's
window, the same attention code path). Export writes it back (`null` for
none). Phi-4-mini's partial rotary and tied embeddings raise.

keras-hub has no Hugging Face loader for Phi-3: the tests write checkpoints
from keras-hub's `Phi3Backbone` with `transformers`' names and layouts and
compare against that model (`tests/saving/test_huggingface_phi3.py`).
"""

import math

from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_IGNORABLE
from keras_nlp.models.llama.llama_huggingface import check_head_dim
from keras_nlp.saving.huggingface import HEADS_KERNEL
from keras_nlp.saving.huggingface import HEADS_OUTPUT_KERNEL
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface.fields import check_full_rotation
from keras_nlp.saving.huggingface.fields import read_sizes
from keras_nlp.saving.huggingface.fields import read_window
from keras_nlp.saving.huggingface.fields import write_sizes

_BLOCK = "transformer_layer_{i}/"
_LAYER = "model.layers.{i}."
_LONGROPE = ("longrope", "su")
_FACTOR_KEYS = ("short_factor", "long_factor")


def _weights(config):
    head_dim = config["hidden_dim"] // config["num_query_heads"]
    queries = config["num_query_heads"] * head_dim
    keys = config["num_key_value_heads"] * head_dim
    intermediate = config["intermediate_dim"]
    qkv = _LAYER + "self_attn.qkv_proj.weight"
    gate_up = _LAYER + "mlp.gate_up_proj.weight"
    attention = _BLOCK + "attention/"
    return [
        Weight("token_embedding/embeddings", "model.embed_tokens.weight"),
        Weight("token_embedding/reverse_embeddings", "lm_head.weight", KERNEL),
        Weight(attention + "query/kernel", qkv, HEADS_KERNEL, part=(0, 0)),
        Weight(attention + "key/kernel", qkv, HEADS_KERNEL, part=(0, queries)),
        Weight(
            attention + "value/kernel",
            qkv,
            HEADS_KERNEL,
            part=(0, queries + keys),
        ),
        Weight(
            attention + "attention_output/kernel",
            _LAYER + "self_attn.o_proj.weight",
            HEADS_OUTPUT_KERNEL,
        ),
        Weight(
            _BLOCK + "pre_attention_layernorm/scale",
            _LAYER + "input_layernorm.weight",
        ),
        Weight(
            _BLOCK + "post_attention_layernorm/scale",
            _LAYER + "post_attention_layernorm.weight",
        ),
        Weight(
            _BLOCK + "feedforward_gate_dense/kernel",
            gate_up,
            KERNEL,
            part=(0, 0),
        ),
        Weight(
            _BLOCK + "feedforward_intermediate_dense/kernel",
            gate_up,
            KERNEL,
            part=(0, intermediate),
        ),
        Weight(
            _BLOCK + "feedforward_output_dense/kernel",
            _LAYER + "mlp.down_proj.weight",
            KERNEL,
        ),
        Weight("sequence_output_layernorm/scale", "model.norm.weight"),
    ]


def _amplitude(max_length, original_length):
    ratio = max_length / original_length
    if ratio <= 1.0:
        return 1.0
    return math.sqrt(1 + math.log(ratio) / math.log(original_length))


def _read_rope(hf, max_length):
    """`(theta, scaling type, original length, factors)` of either spelling
    (`rope_theta` + `rope_scaling`, or v5's `rope_parameters`)."""
    field = "rope_scaling"
    rope = hf.get("rope_scaling")
    parameters = hf.get("rope_parameters")
    if parameters is not None:
        if rope is not None:
            hf.unsupported("rope_scaling", rope, why=" next to rope_parameters")
        field, rope = "rope_parameters", parameters
    if rope is not None and not isinstance(rope, dict):
        hf.unsupported(field, rope, why=" (expected an object)")
    rope = dict(rope or {})
    theta = hf.get("rope_theta", 10000.0)
    theta = rope.pop("rope_theta", theta)
    legacy = rope.pop("type", None)
    kind = rope.pop("rope_type", None) or legacy or "default"
    # transformers 5 moves `partial_rotary_factor` (1.0) in here.
    check_full_rotation(hf, field, rope)
    original = hf.get("original_max_position_embeddings", max_length)
    original = rope.pop("original_max_position_embeddings", original)
    if kind == "default":
        if rope:
            hf.unsupported(field, rope, why=" (keys for no RoPE scaling)")
        return theta, None, original, None
    if kind not in _LONGROPE:
        hf.unsupported(f"{field}.rope_type", kind, ("default", *_LONGROPE))
    factors = {}
    for key in _FACTOR_KEYS:
        if rope.get(key) is None:
            hf.unsupported(field, rope, why=f" (it lacks {key!r})")
        factors[key] = [float(f) for f in rope.pop(key)]
    # Derived values some configs spell out: accepted when they are what
    # the lengths imply (what our backbone computes).
    implied = {
        "factor": max_length / original,
        "attention_factor": _amplitude(max_length, original),
    }
    for key, value in implied.items():
        given = rope.pop(key, None)
        if given is not None and not math.isclose(given, value, rel_tol=1e-6):
            hf.unsupported(
                f"{field}.{key}",
                given,
                [value],
                why=(
                    " (our backbone derives it from max_position_embeddings "
                    "and original_max_position_embeddings)"
                ),
            )
    if rope:
        hf.unsupported(
            field, rope, why=f" (keys {sorted(rope)} are not understood)"
        )
    return theta, "su", original, factors


def _from_hf(hf):
    sizes = read_sizes(hf, grouped=True)
    hf.expect("hidden_act", ("silu",), default="silu")
    hf.expect("partial_rotary_factor", (1.0,), default=1.0)
    hf.expect("tie_word_embeddings", (False,), default=False)
    hf.expect("attention_bias", (False,), default=False)
    hf.expect("mlp_bias", (False,), default=False)
    max_length = hf.get("max_position_embeddings", 4096)
    theta, kind, original, factors = _read_rope(hf, max_length)
    config = {
        **sizes,
        "layer_norm_epsilon": hf.get("rms_norm_eps", 1e-5),
        "dropout": hf.get("attention_dropout", 0.0),
        "max_sequence_length": max_length,
        "pretraining_sequence_length": original,
        "rope_max_wavelength": theta,
        "rope_scaling_type": kind,
        "rope_scaling_short_factor": factors and factors["short_factor"],
        "rope_scaling_long_factor": factors and factors["long_factor"],
        # On every layer (Phi-3 has no per-layer window fields).
        "sliding_window": read_window(hf, sizes["num_layers"], layered=False),
    }
    check_head_dim(hf, config)
    return config


def _to_hf(config):
    rope = None
    if config["rope_scaling_type"] is not None:
        rope = {
            "type": "longrope",
            "short_factor": list(config["rope_scaling_short_factor"]),
            "long_factor": list(config["rope_scaling_long_factor"]),
        }
    return {
        **write_sizes(config, grouped=True),
        "rms_norm_eps": config["layer_norm_epsilon"],
        "attention_dropout": config["dropout"],
        "max_position_embeddings": config["max_sequence_length"],
        "original_max_position_embeddings": config[
            "pretraining_sequence_length"
        ],
        "rope_theta": config["rope_max_wavelength"],
        "rope_scaling": rope,
        "hidden_act": "silu",
        "partial_rotary_factor": 1.0,
        "sliding_window": config["sliding_window"],
        "tie_word_embeddings": False,
    }


PHI3 = register_family(
    HuggingFaceFamily(
        model_type="phi3",
        backbone="Phi3Backbone",
        architectures=("Phi3ForCausalLM",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=_weights,
        ignored_fields=(
            # Training-only rates; `attention_dropout` is our `dropout`.
            "resid_pdrop",
            "embd_pdrop",
        ),
        ignorable_tensors=LLAMA_STYLE_IGNORABLE[:1],
    )
)
