"""Hugging Face `llama` checkpoints (Llama 2, Llama 3, 3.1, 3.2).

`Backbone.from_preset` builds a `Llama3Backbone`, as keras-hub does;
`LlamaBackbone.from_preset` builds a `LlamaBackbone`. The tensor table is
shared by the Llama-style families (Mistral, Qwen 2, Qwen 3): the same
names and layouts, plus their biases and query/key norms.
"""

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

LLAMA_STYLE_WEIGHTS = [
    Weight("token_embedding/embeddings", "model.embed_tokens.weight"),
    Weight("token_embedding/reverse_embeddings", "lm_head.weight", KERNEL),
    *attention_rows(_BLOCK + "self_attention", _LAYER + "self_attn"),
    Weight(
        _BLOCK + "self_attention_layernorm/scale",
        _LAYER + "input_layernorm.weight",
    ),
    Weight(
        _BLOCK + "feedforward_layernorm/scale",
        _LAYER + "post_attention_layernorm.weight",
    ),
    Weight(
        _BLOCK + "feedforward_gate_dense/kernel",
        _LAYER + "mlp.gate_proj.weight",
        KERNEL,
    ),
    Weight(
        _BLOCK + "feedforward_intermediate_dense/kernel",
        _LAYER + "mlp.up_proj.weight",
        KERNEL,
    ),
    Weight(
        _BLOCK + "feedforward_output_dense/kernel",
        _LAYER + "mlp.down_proj.weight",
        KERNEL,
    ),
    Weight("sequence_output_layernorm/scale", "model.norm.weight"),
]
"""The tensor table of the Llama-style decoders."""

LLAMA_STYLE_IGNORABLE = (
    # Rotary caches some checkpoints carry.
    r"model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq",
    # An output projection equal to the tied embedding.
    r"lm_head\.weight",
)
LLAMA_STYLE_IGNORED_FIELDS = (
    # Only bounds positions; RoPE tables are computed for any length.
    "max_position_embeddings",
    # Llama 2's tensor-parallel matmul split: the same numbers.
    "pretraining_tp",
)


def read_llama_style(hf):
    """The arguments every Llama-style family shares, read from `hf`."""
    sizes = read_sizes(hf, grouped=True)
    hf.expect("hidden_act", ("silu",), default="silu")
    hf.expect("mlp_bias", (False,), default=False)
    return {
        **sizes,
        "layer_norm_epsilon": hf.get("rms_norm_eps", 1e-6),
        "dropout": hf.get("attention_dropout", 0.0),
    }


def write_llama_style(config):
    """`config.json` fields of the arguments `read_llama_style` reads."""
    return {
        **write_sizes(config, grouped=True),
        "rms_norm_eps": config["layer_norm_epsilon"],
        "attention_dropout": config["dropout"],
        "hidden_act": "silu",
        "mlp_bias": False,
    }


def check_head_dim(hf, config):
    """For backbones whose head size is `hidden_dim // num_query_heads`."""
    head_dim = hf.get("head_dim")
    implied = config["hidden_dim"] // config["num_query_heads"]
    if head_dim is not None and head_dim != implied:
        hf.unsupported(
            "head_dim",
            head_dim,
            [implied],
            why=" (its head size is hidden_size // num_attention_heads)",
        )


def register_llama_style(
    model_type,
    backbone,
    config_from_hf,
    config_to_hf,
    weights,
    *,
    moe=False,
    ignored_fields=(),
    also_loads=(),
):
    """Registers a Llama-style family; returns its `HuggingFaceFamily`.

    Its architecture is `transformers`' name for `model_type`'s causal LM
    (`qwen2_moe`: `Qwen2MoeForCausalLM`). It ignores the Llama-style
    fields and tensors, plus `ignored_fields`; a mixture of experts
    (`moe`) also ignores `output_router_logits`, which only decides
    whether Hugging Face's forward returns the router logits.
    """
    words = model_type.split("_")
    if moe:
        ignored_fields = (*ignored_fields, "output_router_logits")
    return register_family(
        HuggingFaceFamily(
            model_type=model_type,
            backbone=backbone,
            also_loads=also_loads,
            architectures=(
                "".join(map(str.capitalize, words)) + "ForCausalLM",
            ),
            config_from_hf=config_from_hf,
            config_to_hf=config_to_hf,
            weights=weights,
            ignored_fields=(*LLAMA_STYLE_IGNORED_FIELDS, *ignored_fields),
            ignorable_tensors=LLAMA_STYLE_IGNORABLE,
        )
    )


def _from_hf(hf):
    config = read_llama_style(hf)
    hf.expect("attention_bias", (False,), default=False)
    check_head_dim(hf, config)
    theta, kind, rope = read_rope(hf, ("default", "linear", "llama3"))
    config["rope_max_wavelength"] = theta
    if kind == "linear":
        config["rope_position_scaling_factor"] = rope["factor"]
    elif kind == "llama3":
        config["rope_frequency_adjustment_factor"] = rope["factor"]
        config["rope_low_freq_factor"] = rope["low_freq_factor"]
        config["rope_high_freq_factor"] = rope["high_freq_factor"]
        config["rope_pretraining_sequence_length"] = rope[
            "original_max_position_embeddings"
        ]
    config["tie_word_embeddings"] = hf.get("tie_word_embeddings", False)
    return config


def _to_hf(config):
    fields = write_llama_style(config)
    linear = config.get("rope_position_scaling_factor", 1.0)
    llama3 = config.get("rope_frequency_adjustment_factor")
    if llama3 is not None and linear != 1.0:
        raise ValueError(
            "Hugging Face's Llama config holds one RoPE scaling; this "
            f"backbone has two (rope_position_scaling_factor={linear} and "
            f"rope_frequency_adjustment_factor={llama3})."
        )
    theta = config["rope_max_wavelength"]
    if llama3 is not None:
        rope = write_rope(
            theta,
            "llama3",
            {
                "factor": llama3,
                "low_freq_factor": config["rope_low_freq_factor"],
                "high_freq_factor": config["rope_high_freq_factor"],
                "original_max_position_embeddings": config[
                    "rope_pretraining_sequence_length"
                ],
            },
        )
    elif linear != 1.0:
        rope = write_rope(theta, "linear", {"factor": linear})
    else:
        rope = write_rope(theta)
    return {
        **fields,
        **rope,
        "head_dim": config["hidden_dim"] // config["num_query_heads"],
        "attention_bias": False,
        "tie_word_embeddings": config["tie_word_embeddings"],
        "max_position_embeddings": 8192,
    }


LLAMA = register_llama_style(
    "llama",
    "Llama3Backbone",
    _from_hf,
    _to_hf,
    LLAMA_STYLE_WEIGHTS,
    also_loads=("LlamaBackbone",),
)
