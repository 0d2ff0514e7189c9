"""Hugging Face `qwen3` checkpoints.

The query/key norms of `Qwen3Backbone` use epsilon `1e-5` (keras-hub's
choice), where `transformers` uses `rms_norm_eps` for them too; the
difference is within a few ulps of float32 for weights of usual scale.
"""

from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_WEIGHTS
from keras_nlp.models.llama.llama_huggingface import read_llama_style
from keras_nlp.models.llama.llama_huggingface import register_llama_style
from keras_nlp.models.llama.llama_huggingface import write_llama_style
from keras_nlp.models.qwen.qwen_huggingface import DEFAULT_WINDOW
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface.fields import read_linear_rope
from keras_nlp.saving.huggingface.fields import read_window
from keras_nlp.saving.huggingface.fields import write_head_dim
from keras_nlp.saving.huggingface.fields import write_linear_rope
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
    config.update(read_linear_rope(hf))
    # Hugging Face's Qwen3Config defaults.
    config["head_dim"] = hf.get("head_dim", 128)
    config["tie_word_embeddings"] = hf.get("tie_word_embeddings", False)
    config["sliding_window_size"] = read_window(hf, config["num_layers"])
    return config


def write_qwen3(config):
    """The `qwen3` config fields of our Qwen 3 arguments."""
    return {
        **write_llama_style(config),
        **write_linear_rope(config),
        **write_window(
            config["sliding_window_size"], config["num_layers"], DEFAULT_WINDOW
        ),
        "head_dim": write_head_dim(config),
        "attention_bias": False,
        "tie_word_embeddings": config["tie_word_embeddings"],
        "max_position_embeddings": 40960,
    }


QWEN3 = register_llama_style(
    "qwen3", "Qwen3Backbone", read_qwen3, write_qwen3, QWEN3_WEIGHTS
)
