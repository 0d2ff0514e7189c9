"""Hugging Face `albert` checkpoints.

ALBERT shares its blocks: `num_hidden_groups` groups of `inner_group_num`
blocks, group `g` running for layers `g * L / G` up to the next group's.
Each shared block is one set of tensors
(`albert.encoder.albert_layer_groups.{g}.albert_layers.{j}`), the
backbone's `group_{g}_inner_layer_{j}` block. The pretraining heads
(`predictions.*`, `sop_classifier.*`) are skipped; a masked-LM checkpoint
without a pooler loads with `pooled_dense` initialized (and a warning).
`hidden_act` is read
and written as BERT's (`"gelu"` is the exact GELU, the tanh
approximations `"gelu_approximate"`); absent, it is `AlbertConfig`'s
default `"gelu_new"`.
"""

import dataclasses

from keras_nlp.models.bert.bert_huggingface import ENCODER_IGNORED_FIELDS
from keras_nlp.models.bert.bert_huggingface import LAYER_NORM_EPSILON
from keras_nlp.models.bert.bert_huggingface import POSITION_IDS
from keras_nlp.models.bert.bert_huggingface import TANH_GELUS
from keras_nlp.models.bert.bert_huggingface import read_encoder
from keras_nlp.models.bert.bert_huggingface import read_gelu
from keras_nlp.models.bert.bert_huggingface import write_encoder
from keras_nlp.models.bert.bert_huggingface import write_gelu
from keras_nlp.saving.huggingface import HEADS_BIAS
from keras_nlp.saving.huggingface import HEADS_KERNEL
from keras_nlp.saving.huggingface import HEADS_OUTPUT_KERNEL
from keras_nlp.saving.huggingface import MASKED_LM
from keras_nlp.saving.huggingface import TEXT_CLASSIFIER
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import TaskHead
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import activation_check
from keras_nlp.saving.huggingface import classifier_rows
from keras_nlp.saving.huggingface import layer_norm_rows
from keras_nlp.saving.huggingface import linear_rows
from keras_nlp.saving.huggingface import masked_lm_rows
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface import register_task_head


def _from_hf(hf):
    config = read_encoder(hf, LAYER_NORM_EPSILON)
    config["hidden_activation"] = read_gelu(hf, default="gelu_new")
    groups = hf.get("num_hidden_groups", 1)
    if config["num_layers"] % groups:
        hf.unsupported(
            "num_hidden_groups",
            groups,
            why=(
                " (each group must run for the same number of layers; "
                f"num_hidden_layers={config['num_layers']})"
            ),
        )
    config.update(
        embedding_dim=hf.get("embedding_size", 128),
        num_groups=groups,
        num_inner_repetitions=hf.get("inner_group_num", 1),
        max_sequence_length=hf.get("max_position_embeddings", 512),
        num_segments=hf.get("type_vocab_size", 2),
    )
    return config


def _to_hf(config):
    return {
        **write_encoder(config, LAYER_NORM_EPSILON),
        **write_gelu(config),
        "embedding_size": config["embedding_dim"],
        "num_hidden_groups": config["num_groups"],
        "inner_group_num": config["num_inner_repetitions"],
        "max_position_embeddings": config["max_sequence_length"],
        "type_vocab_size": config["num_segments"],
    }


_BLOCK = "group_{g}_inner_layer_{j}/"
_ATTENTION = _BLOCK + "self_attention_layer/"
_LAYER = "albert.encoder.albert_layer_groups.{g}.albert_layers.{j}."


WEIGHTS = [
    Weight(
        "token_embedding/embeddings", "albert.embeddings.word_embeddings.weight"
    ),
    Weight(
        "position_embedding/embeddings",
        "albert.embeddings.position_embeddings.weight",
    ),
    Weight(
        "segment_embedding/embeddings",
        "albert.embeddings.token_type_embeddings.weight",
    ),
    *layer_norm_rows("embeddings_layer_norm", "albert.embeddings.LayerNorm"),
    *linear_rows(
        "embedding_projection", "albert.encoder.embedding_hidden_mapping_in"
    ),
    *[
        row
        for name in ("query", "key", "value")
        for row in linear_rows(
            _ATTENTION + name,
            _LAYER + "attention." + name,
            HEADS_KERNEL,
            HEADS_BIAS,
        )
    ],
    *linear_rows(
        _ATTENTION + "attention_output",
        _LAYER + "attention.dense",
        HEADS_OUTPUT_KERNEL,
    ),
    *layer_norm_rows(
        _BLOCK + "self_attention_layer_norm", _LAYER + "attention.LayerNorm"
    ),
    *linear_rows(_BLOCK + "feedforward_intermediate_dense", _LAYER + "ffn"),
    *linear_rows(_BLOCK + "feedforward_output_dense", _LAYER + "ffn_output"),
    *layer_norm_rows(
        _BLOCK + "feedforward_layer_norm", _LAYER + "full_layer_layer_norm"
    ),
    # Absent from masked-LM checkpoints (`AlbertForMaskedLM`).
    *[
        dataclasses.replace(row, optional=True)
        for row in linear_rows("pooled_dense", "albert.pooler")
    ],
]

ALBERT = register_family(
    HuggingFaceFamily(
        model_type="albert",
        backbone="AlbertBackbone",
        architectures=("AlbertModel",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=WEIGHTS,
        ignored_fields=(
            *ENCODER_IGNORED_FIELDS,
            "classifier_dropout_prob",
            # Fields of the original TensorFlow configs that Hugging Face's
            # ALBERT does not use.
            "down_scale_factor",
            "gap_size",
            "net_structure_type",
            "num_memory_blocks",
        ),
        ignorable_tensors=(
            # The pretraining heads (masked LM, sentence order).
            r"predictions\..*",
            r"sop_classifier\..*",
            r"(albert\.)?" + POSITION_IDS,
        ),
        base_prefix="albert.",
    )
)

# The pooled output (`albert.pooler`), dropout, `classifier`.
register_task_head(
    TaskHead(
        "albert",
        TEXT_CLASSIFIER,
        "AlbertForSequenceClassification",
        classifier_rows("classifier"),
    )
)
# `predictions`: dense to the embedding width, `hidden_act`, LayerNorm, the
# tied decoder. Our head's GELU is the tanh approximation.
register_task_head(
    TaskHead(
        "albert",
        MASKED_LM,
        "AlbertForMaskedLM",
        masked_lm_rows(
            "predictions.dense", "predictions.LayerNorm", "predictions.bias"
        ),
        ignorable_tensors=(r"predictions\.decoder\.(weight|bias)",),
        check=activation_check(
            "hidden_act", "gelu_new", TANH_GELUS, "AlbertMaskedLM"
        ),
        task_arguments={"layer_norm_epsilon": LAYER_NORM_EPSILON},
    )
)
