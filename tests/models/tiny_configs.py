"""One tiny config per backbone class, for checks that cover them all.

Each keeps its family's distinctive shape (shared key/value heads, an odd
vocabulary, experts) at a size that builds in a fraction of a second.
"""

import importlib

_SMALL = dict(vocabulary_size=96, num_layers=2, hidden_dim=32)

# class name -> (module, config)
TINY_CONFIGS = {
    "GemmaBackbone": (
        "keras_nlp.models.gemma.gemma_backbone",
        dict(
            _SMALL,
            num_query_heads=4,
            num_key_value_heads=1,
            intermediate_dim=64,
            head_dim=8,
        ),
    ),
    "Gemma3Backbone": (
        "keras_nlp.models.gemma3.gemma3_backbone",
        dict(
            _SMALL,
            image_size=16,
            num_query_heads=4,
            num_key_value_heads=2,
            intermediate_dim=64,
            head_dim=8,
        ),
    ),
    "LlamaBackbone": (
        "keras_nlp.models.llama.llama_backbone",
        dict(
            _SMALL,
            num_query_heads=4,
            num_key_value_heads=4,
            intermediate_dim=48,
        ),
    ),
    "Llama3Backbone": (
        "keras_nlp.models.llama3.llama3_backbone",
        dict(
            _SMALL,
            num_query_heads=8,
            num_key_value_heads=2,
            intermediate_dim=48,
        ),
    ),
    "MistralBackbone": (
        "keras_nlp.models.mistral.mistral_backbone",
        dict(
            _SMALL,
            num_query_heads=8,
            num_key_value_heads=2,
            intermediate_dim=48,
            sliding_window=4,
        ),
    ),
    "MixtralBackbone": (
        "keras_nlp.models.mixtral.mixtral_backbone",
        dict(
            _SMALL,
            num_query_heads=8,
            num_key_value_heads=2,
            intermediate_dim=48,
            num_experts=4,
            top_k=2,
        ),
    ),
    "Phi3Backbone": (
        "keras_nlp.models.phi3.phi3_backbone",
        dict(
            _SMALL,
            num_query_heads=4,
            num_key_value_heads=4,
            intermediate_dim=48,
        ),
    ),
    "QwenBackbone": (
        "keras_nlp.models.qwen.qwen_backbone",
        dict(
            _SMALL,
            num_query_heads=8,
            num_key_value_heads=2,
            intermediate_dim=48,
            tie_word_embeddings=True,
        ),
    ),
    "Qwen3Backbone": (
        "keras_nlp.models.qwen3.qwen3_backbone",
        dict(
            _SMALL,
            num_query_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            intermediate_dim=48,
        ),
    ),
    "GPT2Backbone": (
        "keras_nlp.models.gpt2.gpt2_backbone",
        dict(
            _SMALL,
            vocabulary_size=97,
            num_heads=4,
            intermediate_dim=64,
            max_sequence_length=32,
        ),
    ),
    "OPTBackbone": (
        "keras_nlp.models.opt.opt_backbone",
        dict(_SMALL, num_heads=4, intermediate_dim=64, max_sequence_length=32),
    ),
    "GPTNeoXBackbone": (
        "keras_nlp.models.gpt_neo_x.gpt_neo_x_backbone",
        dict(_SMALL, num_heads=4, intermediate_dim=64, max_sequence_length=32),
    ),
    "BloomBackbone": (
        "keras_nlp.models.bloom.bloom_backbone",
        dict(_SMALL, num_heads=4, intermediate_dim=64),
    ),
    "FalconBackbone": (
        "keras_nlp.models.falcon.falcon_backbone",
        dict(_SMALL, num_attention_heads=4, intermediate_dim=64),
    ),
}


def backbone_class(name):
    module, _ = TINY_CONFIGS[name]
    return getattr(importlib.import_module(module), name)


def tiny(name):
    """`(backbone class, tiny config)` for a class name."""
    return backbone_class(name), dict(TINY_CONFIGS[name][1])
