"""Hugging Face `qwen3_5_moe` and `qwen3_5_moe_text` checkpoints (text).

Qwen 3.5's text checkpoints (see `qwen3_5_huggingface.py`: the nested
`text_config`, the tensors under `model.language_model.`, the vision tower
skipped) whose feed-forward is a mixture of experts, as keras-hub 0.32's
`convert_qwen3_5_moe` reads it: the router `mlp.gate`, the experts fused
as transformers 5 stores them, `mlp.experts.gate_up_proj` `(experts, 2 *
width, hidden)` (gate rows first) and `mlp.experts.down_proj` `(experts,
hidden, width)`, the shared expert `mlp.shared_expert.{gate,up,down}_proj`
and its gate `mlp.shared_expert_gate`. Checkpoints with one tensor per
expert instead (`mlp.experts.{e}.gate_proj.weight`, `up_proj`,
`down_proj`, as keras-hub also reads them) load the same (see
`keras_nlp.saving.huggingface.per_expert`); export writes the fused form.
A MoE text config's `intermediate_size` sizes no layer here
(every block is sparse) and is not read.
"""

from keras_nlp.models.qwen3_5.qwen3_5_huggingface import BLOCK
from keras_nlp.models.qwen3_5.qwen3_5_huggingface import IGNORABLE_TENSORS
from keras_nlp.models.qwen3_5.qwen3_5_huggingface import IGNORED_FIELDS
from keras_nlp.models.qwen3_5.qwen3_5_huggingface import LAYER
from keras_nlp.models.qwen3_5.qwen3_5_huggingface import MULTIMODAL_FIELDS
from keras_nlp.models.qwen3_5.qwen3_5_huggingface import OLD_NAMES
from keras_nlp.models.qwen3_5.qwen3_5_huggingface import TEXT_PREFIX
from keras_nlp.models.qwen3_5.qwen3_5_huggingface import qwen3_5_weights
from keras_nlp.models.qwen3_5.qwen3_5_huggingface import read_nested
from keras_nlp.models.qwen3_5.qwen3_5_huggingface import read_qwen3_5_text
from keras_nlp.models.qwen3_5.qwen3_5_huggingface import write_nested
from keras_nlp.models.qwen3_5.qwen3_5_huggingface import write_qwen3_5_text
from keras_nlp.models.qwen3_5_moe.qwen3_5_moe_backbone import MOE_BLOCK
from keras_nlp.models.qwen3_5_moe.qwen3_5_moe_backbone import ROUTER_NAMES
from keras_nlp.models.qwen3_5_moe.qwen3_5_moe_backbone import SHARED_EXPERT
from keras_nlp.models.qwen3_5_moe.qwen3_5_moe_backbone import SHARED_EXPERT_GATE
from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Transpose
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface.per_expert import PER_EXPERT_DOWN
from keras_nlp.saving.huggingface.per_expert import PER_EXPERT_GATE_UP

_MOE = BLOCK + MOE_BLOCK + "/"
# Fields without effect on what we build.
MOE_IGNORED_FIELDS = (
    *IGNORED_FIELDS,
    # Only whether transformers' forward returns the router logits.
    "output_router_logits",
    # No dense block here.
    "intermediate_size",
)
# Ours `(experts, a, b)`, theirs `(experts, b, a)`.
EXPERT_KERNEL = (Transpose((0, 2, 1)),)
MOE_FEEDFORWARD = [
    Weight(
        _MOE + ROUTER_NAMES["router"] + "/kernel",
        LAYER + "mlp.gate.weight",
        KERNEL,
    ),
    Weight(
        _MOE + "experts/expert_feedforward_gate_dense",
        LAYER + "mlp.experts.gate_up_proj",
        EXPERT_KERNEL,
        stored_as=(PER_EXPERT_GATE_UP,),
    ),
    Weight(
        _MOE + "experts/expert_feedforward_output_dense",
        LAYER + "mlp.experts.down_proj",
        EXPERT_KERNEL,
        stored_as=(PER_EXPERT_DOWN,),
    ),
    *(
        Weight(
            _MOE + f"{SHARED_EXPERT}/feedforward_{ours}_dense/kernel",
            LAYER + f"mlp.shared_expert.{theirs}_proj.weight",
            KERNEL,
        )
        for ours, theirs in (
            ("gate", "gate"),
            ("intermediate", "up"),
            ("output", "down"),
        )
    ),
    Weight(
        _MOE + SHARED_EXPERT_GATE + "/kernel",
        LAYER + "mlp.shared_expert_gate.weight",
        KERNEL,
    ),
]


def read_qwen3_5_moe_text(hf):
    """Our `Qwen3_5MoeBackbone` arguments of a MoE text config."""
    config = read_qwen3_5_text(hf, dense=False)
    hf.expect("norm_topk_prob", (True,), default=True)
    hf.expect("decoder_sparse_step", (1,), default=1)
    config.update(
        moe_intermediate_dim=hf.require("moe_intermediate_size"),
        shared_expert_intermediate_size=hf.require(
            "shared_expert_intermediate_size"
        ),
        num_experts=hf.require("num_experts"),
        top_k=hf.require("num_experts_per_tok"),
        router_aux_loss_coefficient=hf.get("router_aux_loss_coef", 0.001),
    )
    return config


def _from_hf(hf):
    return read_nested(
        hf, "qwen3_5_moe_text", read_qwen3_5_moe_text, MOE_IGNORED_FIELDS
    )


def _to_hf(config):
    text = write_qwen3_5_text(config, "qwen3_5_moe_text")
    text.update(
        moe_intermediate_size=config["moe_intermediate_dim"],
        shared_expert_intermediate_size=config[
            "shared_expert_intermediate_size"
        ],
        num_experts=config["num_experts"],
        num_experts_per_tok=config["top_k"],
        norm_topk_prob=True,
        router_aux_loss_coef=config["router_aux_loss_coefficient"],
        output_router_logits=False,
    )
    return write_nested(
        text, "Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe"
    )


QWEN3_5_MOE = register_family(
    HuggingFaceFamily(
        model_type=("qwen3_5_moe", "qwen3_5_moe_text"),
        backbone="Qwen3_5MoeBackbone",
        architectures=("Qwen3_5MoeForConditionalGeneration",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=qwen3_5_weights(MOE_FEEDFORWARD),
        ignored_fields=(*MOE_IGNORED_FIELDS, *MULTIMODAL_FIELDS),
        ignorable_tensors=IGNORABLE_TENSORS,
        base_prefix=TEXT_PREFIX,
        old_names=OLD_NAMES,
    )
)
