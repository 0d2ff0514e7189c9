"""Hugging Face `mistral` checkpoints (Mistral 7B v0.1 to v0.3)."""

from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_IGNORABLE
from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_IGNORED_FIELDS
from keras_nlp.models.llama.llama_huggingface import LLAMA_STYLE_WEIGHTS
from keras_nlp.models.llama.llama_huggingface import read_llama_style
from keras_nlp.models.llama.llama_huggingface import write_llama_style
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface.fields import read_rope
from keras_nlp.saving.huggingface.fields import read_window
from keras_nlp.saving.huggingface.fields import write_rope


def _from_hf(hf):
    config = read_llama_style(hf)
    hf.expect("attention_bias", (False,), default=False)
    # MistralBackbone has no tied output embedding.
    hf.expect("tie_word_embeddings", (False,), default=False)
    theta, kind, rope = read_rope(hf, ("default", "linear"))
    config["rope_max_wavelength"] = theta
    config["rope_scaling_factor"] = rope.get("factor", 1.0)
    config["head_dim"] = hf.get("head_dim")
    config["sliding_window"] = read_window(
        hf, config["num_layers"], layered=False
    )
    return config


def _to_hf(config):
    factor = config["rope_scaling_factor"]
    kind = "default" if factor == 1.0 else "linear"
    parameters = {"factor": factor} if kind == "linear" else None
    head_dim = config["head_dim"]
    return {
        **write_llama_style(config),
        **write_rope(config["rope_max_wavelength"], kind, parameters),
        "head_dim": (
            config["hidden_dim"] // config["num_query_heads"]
            if head_dim is None
            else head_dim
        ),
        "sliding_window": config["sliding_window"],
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
    }


MISTRAL = register_family(
    HuggingFaceFamily(
        model_type="mistral",
        backbone="MistralBackbone",
        architectures=("MistralForCausalLM",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=LLAMA_STYLE_WEIGHTS,
        ignored_fields=LLAMA_STYLE_IGNORED_FIELDS,
        ignorable_tensors=LLAMA_STYLE_IGNORABLE,
    )
)
