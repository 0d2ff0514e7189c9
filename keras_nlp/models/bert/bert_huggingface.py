"""Hugging Face `bert` checkpoints (BERT, and sentence-transformers' BERTs).

A `BertModel` checkpoint (no prefix) and a `BertForMaskedLM` or
`BertForPreTraining` one (`bert.` prefix, plus the `cls.*` heads, which a
backbone drops) both load; so do older checkpoints that name LayerNorm
weights `gamma`/`beta`. A `BertForMaskedLM` checkpoint has no pooler: the
backbone's `pooled_dense` then keeps its initial values, with a warning
(the pooled output is untrained). Export writes `BertModel`'s tensors
under the `bert.` prefix, which every BERT class of Hugging Face loads.
The task heads (`BertForSequenceClassification`'s `classifier`,
`BertForMaskedLM`'s `cls.predictions`) are registered below: a backbone
skips them, `BertTextClassifier` and `BertMaskedLM` load and export them
(`keras_nlp.saving.huggingface.task_heads`).

`hidden_act` chooses the backbone's `hidden_activation`: `"gelu"` (the
exact, erf-based GELU of Hugging Face's BERTs) is `"gelu"`, so those
checkpoints compute what `transformers` computes; the tanh approximations
(`gelu_new`, `gelu_pytorch_tanh`, `gelu_fast`) are `"gelu_approximate"`,
keras-hub's (and Google's original BERT's) activation. Export writes
`"gelu"` or `"gelu_new"` to match. ALBERT reads and writes
`hidden_act` the same way (`read_gelu`, `write_gelu`).
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
from keras_nlp.saving.huggingface import activation_check
from keras_nlp.saving.huggingface import classifier_rows
from keras_nlp.saving.huggingface import masked_lm_rows
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface import register_task_head
from keras_nlp.saving.huggingface.fields import read_sizes
from keras_nlp.saving.huggingface.fields import write_sizes

# Hugging Face's names of the tanh-approximated GELU, and the exact one.
TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")
GELUS = ("gelu", *TANH_GELUS)

# Our `hidden_activation` of each Hugging Face GELU, and the name export
# writes for each of ours.
HIDDEN_ACTIVATIONS = {
    "gelu": "gelu",
    **dict.fromkeys(TANH_GELUS, "gelu_approximate"),
}
HIDDEN_ACTS = {"gelu": "gelu", "gelu_approximate": "gelu_new"}

# Fields that only set training behaviour or bound the input.
ENCODER_IGNORED_FIELDS = (
    "attention_probs_dropout_prob",
    "classifier_dropout",
    "gradient_checkpointing",
)
# Older checkpoints (converted from TensorFlow) name LayerNorm weights
# `gamma`/`beta`.
LAYER_NORM_OLD_NAMES = (
    (r"LayerNorm\.weight$", "LayerNorm.gamma"),
    (r"LayerNorm\.bias$", "LayerNorm.beta"),
)
# Hugging Face's position-id buffer, saved by older versions.
POSITION_IDS = r"embeddings\.position_ids"


def encoder_block_weights(ours, theirs):
    """The table of BERT-style encoder blocks.

    Args:
        ours: our block path, e.g. `"transformer_layer_{i}/"`.
        theirs: their block name, e.g. `"bert.encoder.layer.{i}."`.
    """
    attention = ours + "self_attention_layer/"
    rows = []
    for name in ("query", "key", "value"):
        rows += [
            Weight(
                attention + name + "/kernel",
                theirs + f"attention.self.{name}.weight",
                HEADS_KERNEL,
            ),
            Weight(
                attention + name + "/bias",
                theirs + f"attention.self.{name}.bias",
                HEADS_BIAS,
            ),
        ]
    return rows + [
        Weight(
            attention + "attention_output/kernel",
            theirs + "attention.output.dense.weight",
            HEADS_OUTPUT_KERNEL,
        ),
        Weight(
            attention + "attention_output/bias",
            theirs + "attention.output.dense.bias",
        ),
        Weight(
            ours + "self_attention_layer_norm/gamma",
            theirs + "attention.output.LayerNorm.weight",
        ),
        Weight(
            ours + "self_attention_layer_norm/beta",
            theirs + "attention.output.LayerNorm.bias",
        ),
        Weight(
            ours + "feedforward_intermediate_dense/kernel",
            theirs + "intermediate.dense.weight",
            KERNEL,
        ),
        Weight(
            ours + "feedforward_intermediate_dense/bias",
            theirs + "intermediate.dense.bias",
        ),
        Weight(
            ours + "feedforward_output_dense/kernel",
            theirs + "output.dense.weight",
            KERNEL,
        ),
        Weight(
            ours + "feedforward_output_dense/bias",
            theirs + "output.dense.bias",
        ),
        Weight(
            ours + "feedforward_layer_norm/gamma",
            theirs + "output.LayerNorm.weight",
        ),
        Weight(
            ours + "feedforward_layer_norm/beta",
            theirs + "output.LayerNorm.bias",
        ),
    ]


# The epsilon of every BERT LayerNorm, the head's included: the backbone's,
# and the only `layer_norm_eps` its loader accepts.
LAYER_NORM_EPSILON = 1e-12


def read_encoder(hf, layer_norm_epsilon):
    """The arguments BERT-style encoders share, read from `hf`.

    `layer_norm_epsilon` is the backbone's fixed epsilon; a checkpoint
    with another `layer_norm_eps` is refused.
    """
    hf.expect("position_embedding_type", ("absolute",), default="absolute")
    # A causal (decoder) BERT, or one with cross-attention.
    hf.expect("is_decoder", (False,), default=False)
    hf.expect("add_cross_attention", (False,), default=False)
    # Ties the masked-LM head's decoder to the token embedding (true in
    # transformers 5's configs): the head is not the backbone's, so
    # either value builds the same backbone.
    hf.get("tie_word_embeddings")
    epsilon = hf.get("layer_norm_eps", layer_norm_epsilon)
    if epsilon != layer_norm_epsilon:
        hf.unsupported("layer_norm_eps", epsilon, [layer_norm_epsilon])
    return {
        **read_sizes(hf),
        "dropout": hf.get("hidden_dropout_prob", 0.1),
    }


def read_gelu(hf, default):
    """The `hidden_activation` of `hf`'s `hidden_act` (absent: `default`,
    the Hugging Face config class's default); other activations raise."""
    return HIDDEN_ACTIVATIONS[hf.expect("hidden_act", GELUS, default=default)]


def write_gelu(config):
    """`{"hidden_act": ...}` of our config's `hidden_activation`."""
    return {"hidden_act": HIDDEN_ACTS[config["hidden_activation"]]}


def write_encoder(config, layer_norm_epsilon):
    """`config.json` fields of the arguments `read_encoder` reads."""
    return {
        **write_sizes(config),
        "hidden_dropout_prob": config["dropout"],
        "attention_probs_dropout_prob": config["dropout"],
        "layer_norm_eps": layer_norm_epsilon,
        "position_embedding_type": "absolute",
    }


def _from_hf(hf):
    config = read_encoder(hf, LAYER_NORM_EPSILON)
    config["hidden_activation"] = read_gelu(hf, default="gelu")
    config["max_sequence_length"] = hf.get("max_position_embeddings", 512)
    config["num_segments"] = hf.get("type_vocab_size", 2)
    return config


def _to_hf(config):
    return {
        **write_encoder(config, LAYER_NORM_EPSILON),
        **write_gelu(config),
        "max_position_embeddings": config["max_sequence_length"],
        "type_vocab_size": config["num_segments"],
    }


WEIGHTS = [
    Weight(
        "token_embedding/embeddings", "bert.embeddings.word_embeddings.weight"
    ),
    Weight(
        "position_embedding/embeddings",
        "bert.embeddings.position_embeddings.weight",
    ),
    Weight(
        "segment_embedding/embeddings",
        "bert.embeddings.token_type_embeddings.weight",
    ),
    Weight("embeddings_layer_norm/gamma", "bert.embeddings.LayerNorm.weight"),
    Weight("embeddings_layer_norm/beta", "bert.embeddings.LayerNorm.bias"),
    *encoder_block_weights("transformer_layer_{i}/", "bert.encoder.layer.{i}."),
    # Absent from masked-LM checkpoints.
    Weight(
        "pooled_dense/kernel", "bert.pooler.dense.weight", KERNEL, optional=True
    ),
    Weight("pooled_dense/bias", "bert.pooler.dense.bias", optional=True),
]

BERT = register_family(
    HuggingFaceFamily(
        model_type="bert",
        backbone="BertBackbone",
        architectures=("BertModel",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=WEIGHTS,
        ignored_fields=ENCODER_IGNORED_FIELDS,
        ignorable_tensors=(
            # The pretraining heads (masked LM, next sentence).
            r"cls\..*",
            r"(bert\.)?" + POSITION_IDS,
        ),
        base_prefix="bert.",
        old_names=LAYER_NORM_OLD_NAMES,
    )
)

# The pooled output, dropout, then `classifier`: our classifier's head.
register_task_head(
    TaskHead(
        "bert",
        TEXT_CLASSIFIER,
        "BertForSequenceClassification",
        classifier_rows("classifier"),
    )
)
# `cls.predictions`: dense, `hidden_act`, LayerNorm, the tied decoder.
register_task_head(
    TaskHead(
        "bert",
        MASKED_LM,
        "BertForMaskedLM",
        masked_lm_rows(
            "cls.predictions.transform.dense",
            "cls.predictions.transform.LayerNorm",
            "cls.predictions.bias",
        ),
        also_loads=("BertForPreTraining",),
        ignorable_tensors=(r"cls\.predictions\.decoder\.(weight|bias)",),
        check=activation_check("hidden_act", "gelu", ("gelu",), "BertMaskedLM"),
        # The transform's LayerNorm uses `layer_norm_eps`, which the
        # backbone's loader requires to be 1e-12.
        task_arguments={"layer_norm_epsilon": LAYER_NORM_EPSILON},
    )
)
