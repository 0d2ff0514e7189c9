"""Hugging Face `qwen2` checkpoints (Qwen 2 and Qwen 2.5)."""

from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_WEIGHTS
from keras_nlp.models.llama.llama_huggingface import check_head_dim
from keras_nlp.models.llama.llama_huggingface import read_llama_style
from keras_nlp.models.llama.llama_huggingface import register_llama_style
from keras_nlp.models.llama.llama_huggingface import write_llama_style
from keras_nlp.saving.huggingface import HEADS_BIAS
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface.fields import read_linear_rope
from keras_nlp.saving.huggingface.fields import read_window
from keras_nlp.saving.huggingface.fields import write_linear_rope
from keras_nlp.saving.huggingface.fields import write_window

# Hugging Face's default window size, written when no layer is windowed.
DEFAULT_WINDOW = 32768

QWEN_WEIGHTS = [
    *LLAMA_STYLE_WEIGHTS,
    *(
        Weight(
            f"transformer_layer_{{i}}/self_attention/{ours}/bias",
            f"model.layers.{{i}}.self_attn.{theirs}_proj.bias",
            HEADS_BIAS,
        )
        for ours, theirs in (("query", "q"), ("key", "k"), ("value", "v"))
    ),
]


def read_qwen2(hf):
    """Our Qwen 2 arguments from a `qwen2` (or `qwen2_moe`) config."""
    config = read_llama_style(hf)
    check_head_dim(hf, config)
    config.update(read_linear_rope(hf))
    # Hugging Face's Qwen2Config defaults to an untied output embedding.
    config["tie_word_embeddings"] = hf.get("tie_word_embeddings", False)
    window = read_window(hf, config["num_layers"])
    config["use_sliding_window_attention"] = window is not None
    if window is not None:
        config["sliding_window_size"] = window
    return config


def write_qwen2(config):
    """The `qwen2` config fields of our Qwen 2 arguments."""
    window = (
        config["sliding_window_size"]
        if config["use_sliding_window_attention"]
        else None
    )
    return {
        **write_llama_style(config),
        **write_linear_rope(config),
        **write_window(window, config["num_layers"], DEFAULT_WINDOW),
        "tie_word_embeddings": config["tie_word_embeddings"],
        "max_position_embeddings": 32768,
    }


QWEN2 = register_llama_style(
    "qwen2", "QwenBackbone", read_qwen2, write_qwen2, QWEN_WEIGHTS
)
