"""Hugging Face `distilbert` checkpoints.

A `DistilBertModel` checkpoint (no prefix) and a `DistilBertForMaskedLM`
one (`distilbert.` prefix; its `vocab_*` head is skipped) both load.
DistilBERT's LayerNorms have epsilon 1e-12, as the backbone's.
"""

from keras_nlp.saving.huggingface import HEADS_BIAS
from keras_nlp.saving.huggingface import HEADS_KERNEL
from keras_nlp.saving.huggingface import HEADS_OUTPUT_KERNEL
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import MASKED_LM
from keras_nlp.saving.huggingface import TEXT_CLASSIFIER
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import TaskHead
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import classifier_rows
from keras_nlp.saving.huggingface import masked_lm_rows
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface import register_task_head


def _from_hf(hf):
    hf.expect("activation", ("gelu",), default="gelu")
    # Sinusoidal positions are stored in the position table all the same.
    hf.expect("sinusoidal_pos_embds", (False, True), default=False)
    # Ties the masked-LM head (`vocab_projector`), not the backbone's.
    hf.get("tie_word_embeddings")
    return {
        "vocabulary_size": hf.require("vocab_size"),
        "num_layers": hf.require("n_layers"),
        "num_heads": hf.require("n_heads"),
        "hidden_dim": hf.require("dim"),
        "intermediate_dim": hf.require("hidden_dim"),
        "dropout": hf.get("dropout", 0.1),
        "max_sequence_length": hf.get("max_position_embeddings", 512),
    }


def _to_hf(config):
    return {
        "vocab_size": config["vocabulary_size"],
        "n_layers": config["num_layers"],
        "n_heads": config["num_heads"],
        "dim": config["hidden_dim"],
        "hidden_dim": config["intermediate_dim"],
        "dropout": config["dropout"],
        "attention_dropout": config["dropout"],
        "max_position_embeddings": config["max_sequence_length"],
        "activation": "gelu",
        "sinusoidal_pos_embds": False,
    }


_EMBEDDINGS = "token_and_position_embedding/"
_BLOCK = "transformer_layer_{i}/"
_ATTENTION = _BLOCK + "self_attention_layer/"
_LAYER = "distilbert.transformer.layer.{i}."


def _attention(ours, theirs):
    return [
        Weight(
            _ATTENTION + ours + "/kernel",
            _LAYER + f"attention.{theirs}.weight",
            HEADS_KERNEL,
        ),
        Weight(
            _ATTENTION + ours + "/bias",
            _LAYER + f"attention.{theirs}.bias",
            HEADS_BIAS,
        ),
    ]


def _pair(ours, theirs, names=("kernel", "bias"), kernel_ops=KERNEL):
    """A kernel (or scale) and bias pair."""
    first, second = names
    return [
        Weight(f"{ours}/{first}", f"{theirs}.weight", kernel_ops),
        Weight(f"{ours}/{second}", f"{theirs}.bias"),
    ]


WEIGHTS = [
    Weight(
        _EMBEDDINGS + "token_embedding/embeddings",
        "distilbert.embeddings.word_embeddings.weight",
    ),
    Weight(
        _EMBEDDINGS + "position_embedding/embeddings",
        "distilbert.embeddings.position_embeddings.weight",
    ),
    *_pair(
        "embeddings_layer_norm",
        "distilbert.embeddings.LayerNorm",
        ("gamma", "beta"),
        (),
    ),
    *_attention("query", "q_lin"),
    *_attention("key", "k_lin"),
    *_attention("value", "v_lin"),
    Weight(
        _ATTENTION + "attention_output/kernel",
        _LAYER + "attention.out_lin.weight",
        HEADS_OUTPUT_KERNEL,
    ),
    Weight(
        _ATTENTION + "attention_output/bias", _LAYER + "attention.out_lin.bias"
    ),
    *_pair(
        _BLOCK + "self_attention_layer_norm",
        _LAYER + "sa_layer_norm",
        ("gamma", "beta"),
        (),
    ),
    *_pair(_BLOCK + "feedforward_intermediate_dense", _LAYER + "ffn.lin1"),
    *_pair(_BLOCK + "feedforward_output_dense", _LAYER + "ffn.lin2"),
    *_pair(
        _BLOCK + "feedforward_layer_norm",
        _LAYER + "output_layer_norm",
        ("gamma", "beta"),
        (),
    ),
]

DISTIL_BERT = register_family(
    HuggingFaceFamily(
        model_type="distilbert",
        backbone="DistilBertBackbone",
        architectures=("DistilBertModel",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=WEIGHTS,
        ignored_fields=(
            "attention_dropout",
            "qa_dropout",
            "seq_classif_dropout",
            "tie_weights_",
        ),
        ignorable_tensors=(
            # The masked-LM and classification heads.
            r"vocab_(transform|layer_norm|projector)\.(weight|bias)",
            r"(pre_)?classifier\.(weight|bias)",
            r"(distilbert\.)?embeddings\.position_ids",
        ),
        base_prefix="distilbert.",
    )
)

# The first token, `pre_classifier` + ReLU, dropout, `classifier`.
register_task_head(
    TaskHead(
        "distilbert",
        TEXT_CLASSIFIER,
        "DistilBertForSequenceClassification",
        classifier_rows("classifier", "pre_classifier"),
    )
)
# `vocab_transform`, GELU (the backbone's `activation`, always "gelu"),
# `vocab_layer_norm`, the tied `vocab_projector` and its bias.
register_task_head(
    TaskHead(
        "distilbert",
        MASKED_LM,
        "DistilBertForMaskedLM",
        masked_lm_rows(
            "vocab_transform", "vocab_layer_norm", "vocab_projector.bias"
        ),
        ignorable_tensors=(r"vocab_projector\.weight",),
        # `vocab_layer_norm` has Hugging Face's fixed 1e-12.
        task_arguments={"layer_norm_epsilon": 1e-12},
    )
)
