"""Hugging Face `qwen3` checkpoints.

The query/key norms of `Qwen3Backbone` use epsilon `1e-5` (keras-hub's
choice), where `transformers` uses `rms_norm_eps` for them too; the
difference is within a few ulps of float32 for weights of usual scale.
"""

from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_IGNORABLE
from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_IGNORED_FIELDS
from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_WEIGHTS
from keras_nlp.models.llama.llama_huggingface import read_llama_style
from keras_nlp.models.llama.llama_huggingface import write_llama_style
from keras_nlp.models.qwen.qwen_huggingface import DEFAULT_WINDOW
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface.fields import read_rope
from keras_nlp.saving.huggingface.fields import read_window
from keras_nlp.saving.huggingface.fields import write_rope
from keras_nlp.saving.huggingface.fields import write_window

QWEN3_WEIGHTS = [
    *LLAMA_STYLE_WEIGHTS,
    Weight(
        "transformer_layer_{i}/self_attention/query_dense_layernorm/scale",
        "model.layers.{i}.self_attn.q_norm.weight",
    ),
    Weight(
        "transformer_layer_{i}/self_attention/key_dense_layernorm/scale",
        "model.layers.{i}.self_attn.k_norm.weight",
    ),
]


def read_qwen3(hf):
    """Our Qwen 3 arguments from a `qwen3` (or `qwen3_moe`) config."""
    config = read_llama_style(hf)
    hf.expect("attention_bias", (False,), default=False)
    theta, kind, rope = read_rope(hf, ("default", "linear"))
    config["rope_max_wavelength"] = theta
    config["rope_scaling_factor"] = rope.get("factor", 1.0)
    # Hugging Face's Qwen3Config defaults.
    config["head_dim"] = hf.get("head_dim", 128)
    config["tie_word_embeddings"] = hf.get("tie_word_embeddings", False)
    config["sliding_window_size"] = read_window(hf, config["num_layers"])
    return config


def write_qwen3(config):
    """The `qwen3` config fields of our Qwen 3 arguments."""
    factor = config["rope_scaling_factor"]
    kind = "default" if factor == 1.0 else "linear"
    head_dim = config["head_dim"]
    return {
        **write_llama_style(config),
        **write_rope(
            config["rope_max_wavelength"],
            kind,
            {"factor": factor} if kind == "linear" else None,
        ),
        **write_window(
            config["sliding_window_size"], config["num_layers"], DEFAULT_WINDOW
        ),
        "head_dim": (
            config["hidden_dim"] // config["num_query_heads"]
            if head_dim is None
            else head_dim
        ),
        "attention_bias": False,
        "tie_word_embeddings": config["tie_word_embeddings"],
        "max_position_embeddings": 40960,
    }


QWEN3 = register_family(
    HuggingFaceFamily(
        model_type="qwen3",
        backbone="Qwen3Backbone",
        architectures=("Qwen3ForCausalLM",),
        config_from_hf=read_qwen3,
        config_to_hf=write_qwen3,
        weights=QWEN3_WEIGHTS,
        ignored_fields=LLAMA_STYLE_IGNORED_FIELDS,
        ignorable_tensors=LLAMA_STYLE_IGNORABLE,
    )
)
