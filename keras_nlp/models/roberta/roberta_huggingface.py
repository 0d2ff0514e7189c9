"""Hugging Face `roberta` checkpoints.

Hugging Face's position table has `pad_token_id + 1` (= 2) rows before the
first position, which the backbone does not have: import skips them,
export writes them as zeros (`max_position_embeddings` is
`max_sequence_length + 2`). Hugging Face counts positions over the
non-padding tokens only; the backbone, like keras-hub's, counts from the
first token, which is the same for right-padded (or unpadded) inputs.

RoBERTa adds the token-type embedding of type 0 (`type_vocab_size` is 1)
to every token; it is folded into the position table on import (the
original checkpoints hold zeros there, fine-tuned ones need not) and
written as zeros on export. The masked-LM head (`lm_head.*`) and
classification heads (`classifier.*`) are not the backbone's and are
skipped; the task classes load and export them
(`register_roberta_style` registers both heads). A pooler
(`RobertaModel` has one, `RobertaForMaskedLM` none), which the backbone
does not use, is kept: a checkpoint with one loads with
`keep_pooler=True`, so that the export writes it back.
"""

import re

from keras_nlp.models.bert.bert_huggingface import ENCODER_IGNORED_FIELDS
from keras_nlp.models.bert.bert_huggingface import LAYER_NORM_OLD_NAMES
from keras_nlp.models.bert.bert_huggingface import POSITION_IDS
from keras_nlp.models.bert.bert_huggingface import encoder_block_weights
from keras_nlp.models.bert.bert_huggingface import read_encoder
from keras_nlp.models.bert.bert_huggingface import write_encoder
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import MASKED_LM
from keras_nlp.saving.huggingface import TEXT_CLASSIFIER
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Pad
from keras_nlp.saving.huggingface import TaskHead
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import classifier_rows
from keras_nlp.saving.huggingface import masked_lm_rows
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface import register_task_head

# Hugging Face's padding id, and so its position offset (padding id + 1).
PAD_TOKEN_ID = 1
POSITION_OFFSET = PAD_TOKEN_ID + 1


def read_roberta_style(hf):
    """Our RoBERTa arguments from `hf` (RoBERTa and XLM-RoBERTa)."""
    config = read_encoder(hf, 1e-5)
    hf.expect("hidden_act", ("gelu",), default="gelu")
    # Positions start after the padding id's row.
    hf.expect("pad_token_id", (PAD_TOKEN_ID,), default=PAD_TOKEN_ID)
    rows = hf.get("max_position_embeddings", 514)
    if rows <= POSITION_OFFSET:
        hf.unsupported(
            "max_position_embeddings",
            rows,
            why=f" (its first {POSITION_OFFSET} rows are not positions)",
        )
    config["max_sequence_length"] = rows - POSITION_OFFSET
    hf.get("type_vocab_size", 1)  # Only type 0 is used: its row is folded.
    return config


def write_roberta_style(config):
    """`config.json` fields of the arguments `read_roberta_style` reads."""
    return {
        **write_encoder(config, 1e-5),
        "hidden_act": "gelu",
        "pad_token_id": PAD_TOKEN_ID,
        "max_position_embeddings": (
            config["max_sequence_length"] + POSITION_OFFSET
        ),
        "type_vocab_size": 1,
    }


def roberta_style_weights(prefix):
    """The tensor table, their names under `prefix` (`"roberta."`)."""
    embeddings = prefix + "embeddings."
    return [
        Weight(
            "embeddings/token_embedding/embeddings",
            embeddings + "word_embeddings.weight",
        ),
        Weight(
            "embeddings/position_embedding/embeddings",
            embeddings + "position_embeddings.weight",
            (Pad(0, POSITION_OFFSET),),
            plus=embeddings + "token_type_embeddings.weight",
        ),
        Weight("embeddings_layer_norm/gamma", embeddings + "LayerNorm.weight"),
        Weight("embeddings_layer_norm/beta", embeddings + "LayerNorm.bias"),
        *encoder_block_weights(
            "transformer_layer_{i}/", prefix + "encoder.layer.{i}."
        ),
        # With `keep_pooler` only.
        Weight(
            "pooled_dense/kernel",
            prefix + "pooler.dense.weight",
            KERNEL,
            optional=True,
        ),
        Weight(
            "pooled_dense/bias", prefix + "pooler.dense.bias", optional=True
        ),
    ]


def pooler_options(prefix):
    """`tensor_options`: `keep_pooler` when a checkpoint has a pooler
    (under the regex `prefix` or none)."""
    pooler = re.compile(rf"({prefix})?pooler\.dense\.(weight|bias)")

    def options(names):
        return {"keep_pooler": any(pooler.fullmatch(n) for n in names)}

    return options


def roberta_style_ignorable(prefix):
    """Tensors of Hugging Face's RoBERTa classes a backbone skips (the
    pooler, when built without `keep_pooler`)."""
    return (
        rf"({prefix})?pooler\.dense\.(weight|bias)",
        r"lm_head\..*",
        r"classifier\..*",
        rf"({prefix})?{POSITION_IDS}",
    )


def register_roberta_style(model_type, backbone, architecture):
    """Registers a family of RoBERTa's config fields and tensor names (under
    `roberta.`), and its task heads; returns its `HuggingFaceFamily`."""
    name = architecture.removesuffix("Model")
    # The first token, dropout, `classifier.dense` + tanh, dropout and
    # `classifier.out_proj`: our classifier's `pooled_dense` and `logits`.
    register_task_head(
        TaskHead(
            model_type,
            TEXT_CLASSIFIER,
            name + "ForSequenceClassification",
            classifier_rows("classifier.out_proj", "classifier.dense"),
        )
    )
    # `lm_head`: dense, exact GELU (whatever `hidden_act`), LayerNorm, the
    # tied decoder.
    register_task_head(
        TaskHead(
            model_type,
            MASKED_LM,
            name + "ForMaskedLM",
            masked_lm_rows(
                "lm_head.dense", "lm_head.layer_norm", "lm_head.bias"
            ),
            ignorable_tensors=(r"lm_head\.decoder\.(weight|bias)",),
        )
    )
    return register_family(
        HuggingFaceFamily(
            model_type=model_type,
            backbone=backbone,
            architectures=(architecture,),
            config_from_hf=read_roberta_style,
            config_to_hf=write_roberta_style,
            weights=roberta_style_weights("roberta."),
            ignored_fields=ENCODER_IGNORED_FIELDS,
            ignorable_tensors=roberta_style_ignorable(r"roberta\."),
            base_prefix="roberta.",
            old_names=LAYER_NORM_OLD_NAMES,
            tensor_options=pooler_options(r"roberta\."),
        )
    )


ROBERTA = register_roberta_style("roberta", "RobertaBackbone", "RobertaModel")
