"""Hugging Face `llama4_text` and `llama4` checkpoints (text only).

`llama4_text` (`Llama4ForCausalLM`) is the text model alone: the tensors
are Llama's (`model.layers.N.self_attn.{q,k,v,o}_proj`, `input_layernorm`,
`post_attention_layernorm`) with the feed-forward under `feed_forward.`:
dense blocks `feed_forward.{gate,up,down}_proj`, MoE blocks
`feed_forward.router.weight` `(experts, hidden)`,
`feed_forward.experts.gate_up_proj` `(experts, hidden, 2 * inter)` (the
gate's columns, then the up projection's: our fused kernel as it is),
`feed_forward.experts.down_proj` `(experts, inter, hidden)` and
`feed_forward.shared_expert.{gate,up,down}_proj`. The query and key
kernels are Meta's, unpermuted, for RoPE on interleaved pairs, which is
what `Llama4RotaryEmbedding` rotates.

`llama4` (`Llama4ForConditionalGeneration`, the published Scout and
Maverick checkpoints) nests the text config in `text_config` and prefixes
the text tensors with `language_model.`: it loads as the text backbone,
its vision tower (`vision_model.*`, `multi_modal_projector.*`) and
`vision_config` left out. Export writes `llama4_text`.

Not read: `router_aux_loss_coef` and `output_router_logits` (training
losses and outputs of Hugging Face's forward), `cache_implementation`
(our cache is a full one with the chunk mask). `router_jitter_noise` must
be 0 and `hidden_act` SiLU.
"""

from keras_nlp.models.gemma3.gemma3_huggingface import nested_config
from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_IGNORABLE
from keras_nlp.models.llama4.llama4_backbone import MOE_BLOCK
from keras_nlp.models.llama4.llama4_backbone import moe_layers_of
from keras_nlp.models.llama4.llama4_backbone import rope_layers_of
from keras_nlp.models.llama4.llama4_layers import SHARED_EXPERT
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import attention_rows
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface.fields import read_rope
from keras_nlp.saving.huggingface.fields import write_rope

_BLOCK = "transformer_layer_{i}/"
_LAYER = "model.layers.{i}."
_MOE = _BLOCK + MOE_BLOCK + "/"
_PROJECTIONS = (("gate", "gate"), ("intermediate", "up"), ("output", "down"))
# transformers' Llama4TextConfig defaults for fields a config may omit.
DEFAULTS = {
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-5,
    "num_experts_per_tok": 1,
    "num_local_experts": 16,
    "interleave_moe_layer_step": 1,
    "use_qk_norm": True,
    "attn_temperature_tuning": True,
    "floor_scale": 8192,
    "attn_scale": 0.1,
    "attention_chunk_size": 8192,
    "no_rope_layer_interval": 4,
    "max_position_embeddings": 131072,
}

LLAMA4_WEIGHTS = [
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
    *[
        Weight(
            _BLOCK + f"feedforward_{ours}_dense/kernel",
            _LAYER + f"feed_forward.{theirs}_proj.weight",
            KERNEL,
        )
        for ours, theirs in _PROJECTIONS
    ],
    Weight(
        _MOE + "sparse_feedforward_gate_dense/kernel",
        _LAYER + "feed_forward.router.weight",
        KERNEL,
    ),
    Weight(
        _MOE + "experts/expert_feedforward_gate_dense",
        _LAYER + "feed_forward.experts.gate_up_proj",
    ),
    Weight(
        _MOE + "experts/expert_feedforward_output_dense",
        _LAYER + "feed_forward.experts.down_proj",
    ),
    *[
        Weight(
            _MOE + f"{SHARED_EXPERT}/feedforward_{ours}_dense/kernel",
            _LAYER + f"feed_forward.shared_expert.{theirs}_proj.weight",
            KERNEL,
        )
        for ours, theirs in _PROJECTIONS
    ],
    Weight("sequence_output_layernorm/scale", "model.norm.weight"),
]


def read_llama4_text(hf):
    """Our Llama 4 arguments from a `llama4_text` config (or the
    `text_config` of a `llama4` one)."""
    if hf.get("text_config") is not None:
        # The multimodal checkpoint: its text model only.
        hf.get("vision_config")
        hf.expect("tie_word_embeddings", (False,), default=False)
        return read_llama4_text(nested_config(hf, "text_config", {}))
    hf.expect("hidden_act", ("silu",), default="silu")
    hf.expect("attention_bias", (False,), default=False)
    hf.expect("router_jitter_noise", (0.0, 0), default=0.0)
    get = lambda key: hf.get(key, DEFAULTS.get(key))  # noqa: E731
    num_layers = hf.require("num_hidden_layers")
    interval = get("no_rope_layer_interval")
    no_rope_layers = hf.get("no_rope_layers") or [
        int((i + 1) % interval != 0) for i in range(num_layers)
    ]
    rope = rope_layers_of(num_layers, no_rope_layers)
    layer_types = hf.get("layer_types")
    if layer_types is not None:
        expected = [
            "chunked_attention" if r else "full_attention" for r in rope
        ]
        if list(layer_types) != expected:
            hf.unsupported(
                "layer_types",
                layer_types,
                why=f" (no_rope_layers={no_rope_layers} implies {expected})",
            )
    head_dim = hf.get("head_dim")
    config = {
        "vocabulary_size": hf.require("vocab_size"),
        "num_layers": num_layers,
        "num_query_heads": hf.require("num_attention_heads"),
        "num_key_value_heads": hf.require("num_key_value_heads"),
        "hidden_dim": hf.require("hidden_size"),
        "intermediate_dim": hf.require("intermediate_size"),
        "intermediate_dim_mlp": hf.require("intermediate_size_mlp"),
        "num_experts": get("num_local_experts"),
        "head_dim": head_dim,
        "top_k": get("num_experts_per_tok"),
        "interleave_moe_layer_step": get("interleave_moe_layer_step"),
        "moe_layers": hf.get("moe_layers"),
        "no_rope_layers": rope,
        "attention_chunk_size": hf.get("attention_chunk_size"),
        "use_qk_norm": get("use_qk_norm"),
        "attn_temperature_tuning": get("attn_temperature_tuning"),
        "floor_scale": get("floor_scale"),
        "attn_scale": get("attn_scale"),
        "max_position_embeddings": get("max_position_embeddings"),
        "layer_norm_epsilon": get("rms_norm_eps"),
        "dropout": hf.get("attention_dropout", 0.0),
        "tie_word_embeddings": hf.get("tie_word_embeddings", False),
    }
    theta, kind, parameters = read_rope(
        hf, ("default", "llama3"), default_theta=DEFAULTS["rope_theta"]
    )
    config["rope_max_wavelength"] = theta
    if kind == "llama3":
        config.update(
            rope_frequency_adjustment_factor=parameters["factor"],
            rope_low_freq_factor=parameters["low_freq_factor"],
            rope_high_freq_factor=parameters["high_freq_factor"],
            rope_pretraining_sequence_length=parameters[
                "original_max_position_embeddings"
            ],
        )
    return config


def write_llama4_text(config):
    """The `llama4_text` config fields of our Llama 4 arguments."""
    num_layers = config["num_layers"]
    rope = rope_layers_of(num_layers, config.get("no_rope_layers"))
    moe = moe_layers_of(
        num_layers,
        config.get("interleave_moe_layer_step", 1),
        config.get("moe_layers"),
    )
    head_dim = config.get("head_dim")
    if head_dim is None:
        head_dim = config["hidden_dim"] // config["num_query_heads"]
    theta = config["rope_max_wavelength"]
    factor = config.get("rope_frequency_adjustment_factor")
    # As transformers writes an unscaled config.
    fields = {**write_rope(theta), "rope_scaling": None}
    if factor is not None:
        fields = write_rope(
            theta,
            "llama3",
            {
                "factor": factor,
                "low_freq_factor": config["rope_low_freq_factor"],
                "high_freq_factor": config["rope_high_freq_factor"],
                "original_max_position_embeddings": config[
                    "rope_pretraining_sequence_length"
                ],
            },
        )
    return {
        **fields,
        "vocab_size": config["vocabulary_size"],
        "num_hidden_layers": num_layers,
        "num_attention_heads": config["num_query_heads"],
        "num_key_value_heads": config["num_key_value_heads"],
        "hidden_size": config["hidden_dim"],
        "intermediate_size": config["intermediate_dim"],
        "intermediate_size_mlp": config["intermediate_dim_mlp"],
        "head_dim": head_dim,
        "hidden_act": "silu",
        "num_local_experts": config["num_experts"],
        "num_experts_per_tok": config.get("top_k", 1),
        "interleave_moe_layer_step": config.get("interleave_moe_layer_step", 1),
        "moe_layers": moe,
        "no_rope_layers": rope,
        "layer_types": [
            "chunked_attention" if r else "full_attention" for r in rope
        ],
        "attention_chunk_size": config.get("attention_chunk_size"),
        "use_qk_norm": config.get("use_qk_norm", True),
        "attn_temperature_tuning": config.get("attn_temperature_tuning", True),
        "floor_scale": config.get("floor_scale", 8192),
        "attn_scale": config.get("attn_scale", 0.1),
        "max_position_embeddings": config.get(
            "max_position_embeddings", 131072
        ),
        "rms_norm_eps": config["layer_norm_epsilon"],
        "attention_dropout": config.get("dropout", 0.0),
        "attention_bias": False,
        "router_jitter_noise": 0.0,
        "tie_word_embeddings": config.get("tie_word_embeddings", False),
    }


LLAMA4 = register_family(
    HuggingFaceFamily(
        model_type=("llama4_text", "llama4"),
        backbone="Llama4Backbone",
        architectures=("Llama4ForCausalLM",),
        config_from_hf=read_llama4_text,
        config_to_hf=write_llama4_text,
        weights=LLAMA4_WEIGHTS,
        ignored_fields=(
            "router_aux_loss_coef",
            "output_router_logits",
            "cache_implementation",
            "for_llm_compressor",
            "no_rope_layer_interval",
            "initializer_range",
            "use_cache",
            # `llama4`'s own fields around its text model.
            "boi_token_index",
            "eoi_token_index",
            "image_token_index",
        ),
        ignorable_tensors=(
            *LLAMA_STYLE_IGNORABLE,
            r"vision_model\..*",
            r"multi_modal_projector\..*",
        ),
        # `llama4`'s text tensors: the table's names (or, as the loader
        # strips `model.` from a checkpoint without it, the rest) under
        # `language_model.`.
        old_names=(
            (r"^lm_head\.", "language_model.lm_head."),
            (r"^(?:model\.)?", "language_model.model."),
        ),
    )
)
