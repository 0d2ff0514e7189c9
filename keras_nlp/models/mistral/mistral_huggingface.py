"""Hugging Face `mistral` checkpoints (Mistral 7B v0.1 to v0.3)."""

from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_WEIGHTS
from keras_nlp.models.llama.llama_huggingface import read_llama_style
from keras_nlp.models.llama.llama_huggingface import register_llama_style
from keras_nlp.models.llama.llama_huggingface import write_llama_style
from keras_nlp.saving.huggingface.fields import read_linear_rope
from keras_nlp.saving.huggingface.fields import read_window
from keras_nlp.saving.huggingface.fields import write_head_dim
from keras_nlp.saving.huggingface.fields import write_linear_rope


def _from_hf(hf):
    config = read_llama_style(hf)
    hf.expect("attention_bias", (False,), default=False)
    # MistralBackbone has no tied output embedding.
    hf.expect("tie_word_embeddings", (False,), default=False)
    config.update(read_linear_rope(hf))
    config["head_dim"] = hf.get("head_dim")
    config["sliding_window"] = read_window(
        hf, config["num_layers"], layered=False
    )
    return config


def _to_hf(config):
    return {
        **write_llama_style(config),
        **write_linear_rope(config),
        "head_dim": write_head_dim(config),
        "sliding_window": config["sliding_window"],
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
    }


MISTRAL = register_llama_style(
    "mistral", "MistralBackbone", _from_hf, _to_hf, LLAMA_STYLE_WEIGHTS
)
