"""Hugging Face `smollm3` checkpoints.

The tensors are Llama's, named as keras-hub's SmolLM3 names ours; the
config adds `no_rope_layers` (1 where a layer has RoPE, despite the name),
or `no_rope_layer_interval` when that list is absent (every interval-th
layer without RoPE). Hugging Face's `attention_bias` also gives the output
projection a bias, which keras-hub's SmolLM3 (and ours) lacks, so only
checkpoints without attention biases load.
"""

from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_IGNORABLE
from keras_nlp.models.smollm3.smollm3_backbone import ATTENTION_NAMES
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import attention_rows
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface.fields import read_rope
from keras_nlp.saving.huggingface.fields import read_sizes
from keras_nlp.saving.huggingface.fields import write_rope
from keras_nlp.saving.huggingface.fields import write_sizes

_BLOCK = "transformer_layer_{i}/"
_LAYER = "model.layers.{i}."
# transformers' SmolLM3Config defaults.
DEFAULT_INTERVAL = 4
DEFAULT_THETA = 2000000.0
DEFAULT_POSITIONS = 32768

SMOLLM3_WEIGHTS = [
    Weight("token_embedding/embeddings", "model.embed_tokens.weight"),
    # Biases on q, k and v where the config has them (none on o_proj).
    *attention_rows(
        _BLOCK + "self_attn",
        _LAYER + "self_attn",
        use_bias=True,
        names=ATTENTION_NAMES,
    )[:-1],
    *[
        row
        for proj in ("gate", "up", "down")
        for row in (
            Weight(
                _BLOCK + f"mlp/{proj}_proj/kernel",
                _LAYER + f"mlp.{proj}_proj.weight",
                KERNEL,
            ),
            Weight(
                _BLOCK + f"mlp/{proj}_proj/bias",
                _LAYER + f"mlp.{proj}_proj.bias",
            ),
        )
    ],
    Weight(_BLOCK + "input_layernorm/scale", _LAYER + "input_layernorm.weight"),
    Weight(
        _BLOCK + "post_attention_layernorm/scale",
        _LAYER + "post_attention_layernorm.weight",
    ),
    Weight("sequence_output_layernorm/scale", "model.norm.weight"),
]


def read_smollm3(hf):
    """Our SmolLM3 arguments from a `smollm3` config."""
    sizes = read_sizes(hf, grouped=True)
    num_layers = sizes["num_layers"]
    hf.expect("hidden_act", ("silu",), default="silu")
    hf.expect("attention_bias", (False,), default=False)
    hf.expect("tie_word_embeddings", (True,), default=True)
    hf.expect("use_sliding_window", (False,), default=False)
    head_dim = hf.get("head_dim")
    implied = sizes["hidden_dim"] // sizes["num_query_heads"]
    if head_dim is not None and head_dim != implied:
        hf.unsupported("head_dim", head_dim, [implied])
    theta, _, _ = read_rope(hf, ("default",), default_theta=DEFAULT_THETA)
    interval = hf.get("no_rope_layer_interval", DEFAULT_INTERVAL)
    enabled = hf.get("no_rope_layers")
    if enabled is None:
        enabled = [(i + 1) % interval != 0 for i in range(num_layers)]
    layer_types = hf.get("layer_types") or ["full_attention"] * num_layers
    for field, values in (
        ("no_rope_layers", enabled),
        ("layer_types", layer_types),
    ):
        if len(values) != num_layers:
            hf.unsupported(field, values, why=" (one entry per layer)")
    if set(layer_types) != {"full_attention"}:
        hf.unsupported("layer_types", layer_types, ["full_attention"])
    return {
        "vocabulary_size": sizes["vocabulary_size"],
        "hidden_dim": sizes["hidden_dim"],
        "intermediate_dim": sizes["intermediate_dim"],
        "num_layers": num_layers,
        "num_attention_heads": sizes["num_query_heads"],
        "num_key_value_heads": sizes["num_key_value_heads"],
        "attention_bias": False,
        "attention_dropout": hf.get("attention_dropout", 0.0),
        "rope_layer_enabled_list": [bool(x) for x in enabled],
        "layer_types": list(layer_types),
        "mlp_bias": hf.get("mlp_bias", False),
        "layer_norm_epsilon": hf.get("rms_norm_eps", 1e-6),
        "max_position_embeddings": hf.get(
            "max_position_embeddings", DEFAULT_POSITIONS
        ),
        "rope_theta": theta,
        "partial_rotary_factor": 1.0,
    }


def write_smollm3(config):
    """The `smollm3` config fields of our SmolLM3 arguments."""
    if config["attention_bias"]:
        raise ValueError(
            "A `smollm3` checkpoint with attention biases also has an "
            "output projection bias, which SmolLM3Backbone lacks: only "
            "attention_bias=False exports. Received: attention_bias=True."
        )
    sizes = dict(
        config,
        num_query_heads=config["num_attention_heads"],
    )
    return {
        **write_sizes(sizes, grouped=True),
        **write_rope(config["rope_theta"]),
        "rms_norm_eps": config["layer_norm_epsilon"],
        "attention_dropout": config["attention_dropout"],
        "attention_bias": False,
        "mlp_bias": config["mlp_bias"],
        "hidden_act": "silu",
        "no_rope_layers": [int(x) for x in config["rope_layer_enabled_list"]],
        "no_rope_layer_interval": DEFAULT_INTERVAL,
        "layer_types": list(config["layer_types"]),
        "use_sliding_window": False,
        "sliding_window": None,
        "max_position_embeddings": config["max_position_embeddings"],
        "tie_word_embeddings": True,
    }


SMOLLM3 = register_family(
    HuggingFaceFamily(
        model_type="smollm3",
        backbone="SmolLM3Backbone",
        architectures=("SmolLM3ForCausalLM",),
        config_from_hf=read_smollm3,
        config_to_hf=write_smollm3,
        weights=SMOLLM3_WEIGHTS,
        # Read only when `use_sliding_window` is on, which is refused.
        ignored_fields=("sliding_window", "initializer_range", "use_cache"),
        ignorable_tensors=LLAMA_STYLE_IGNORABLE,
    )
)
