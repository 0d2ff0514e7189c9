"""Hugging Face `opt` checkpoints (OPT 125M to 66B).

Separate query/key/value projections with biases, `fc1`/`fc2` and
pre-LayerNorm blocks, as our backbone. `embed_positions` has two rows more
than positions (fairseq's padding offset): our table is its rows from 2 on,
and export writes the two leading rows as zeros.

One difference in meaning: `transformers` counts a row's positions from its
first unpadded token, our backbone (like keras-hub) from its first token.
Outputs agree on unpadded and right-padded inputs; on left-padded ones the
real tokens see shifted positions.

OPT-350M has post-LayerNorm blocks (`do_layer_norm_before=false`, our
`normalize_first=False`), which leaves out the final LayerNorm, and a
token table narrower than the blocks (`word_embed_proj_dim` 512 for
`hidden_size` 1024, our `token_embedding_dim`) with the bias-free
`project_in`/`project_out` (our `embeddings/project_in`, `project_out`).
`_remove_final_layer_norm=true` (pre-LayerNorm blocks without the final
LayerNorm, a `transformers` compatibility flag) is refused. A post-norm
checkpoint that still stores a final LayerNorm loads without it, as in
`transformers`.

keras-hub has no Hugging Face loader for OPT: the tests write checkpoints
from keras-hub's `OPTBackbone` with `transformers`' names and layouts and
compare against that model (`tests/saving/test_huggingface_opt.py`).
"""

from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Pad
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import attention_rows
from keras_nlp.saving.huggingface import layer_norm_rows
from keras_nlp.saving.huggingface import linear_rows
from keras_nlp.saving.huggingface import register_family

_BLOCK = "transformer_layer_{i}/"
_LAYER = "model.decoder.layers.{i}."
# fairseq's position offset: HF's row `p + 2` is position `p`.
POSITION_OFFSET = 2

WEIGHTS = [
    Weight(
        "embeddings/token_embedding/embeddings",
        "model.decoder.embed_tokens.weight",
    ),
    Weight(
        "embeddings/position_embedding/embeddings",
        "model.decoder.embed_positions.weight",
        (Pad(0, POSITION_OFFSET),),
    ),
    *attention_rows(
        _BLOCK + "self_attention",
        _LAYER + "self_attn",
        output="out_proj",
        use_bias=True,
    ),
    *layer_norm_rows(
        _BLOCK + "self_attention_layer_norm", _LAYER + "self_attn_layer_norm"
    ),
    *layer_norm_rows(
        _BLOCK + "feedforward_layer_norm", _LAYER + "final_layer_norm"
    ),
    *linear_rows(_BLOCK + "feedforward_intermediate_dense", _LAYER + "fc1"),
    *linear_rows(_BLOCK + "feedforward_output_dense", _LAYER + "fc2"),
    *layer_norm_rows("layer_norm", "model.decoder.final_layer_norm"),
    # OPT-350M's embedding projections.
    Weight(
        "embeddings/project_in/kernel",
        "model.decoder.project_in.weight",
        KERNEL,
    ),
    Weight("project_out/kernel", "model.decoder.project_out.weight", KERNEL),
]


def _from_hf(hf):
    hidden = hf.require("hidden_size")
    normalize_first = hf.expect(
        "do_layer_norm_before", (True, False), default=True
    )
    # Only pre-LayerNorm blocks have a final LayerNorm to remove.
    hf.expect(
        "_remove_final_layer_norm",
        (False,) if normalize_first else (False, True),
        default=False,
    )
    hf.expect("enable_bias", (True,), default=True)
    hf.expect("layer_norm_elementwise_affine", (True,), default=True)
    hf.expect("activation_function", ("relu",), default="relu")
    hf.expect("tie_word_embeddings", (True,), default=True)
    token_width = hf.get("word_embed_proj_dim", hidden)
    return {
        "vocabulary_size": hf.require("vocab_size"),
        "num_layers": hf.require("num_hidden_layers"),
        "num_heads": hf.require("num_attention_heads"),
        "hidden_dim": hidden,
        "intermediate_dim": hf.require("ffn_dim"),
        "dropout": hf.get("dropout", 0.1),
        "max_sequence_length": hf.require("max_position_embeddings"),
        "normalize_first": normalize_first,
        "token_embedding_dim": None if token_width == hidden else token_width,
    }


def _to_hf(config):
    return {
        "vocab_size": config["vocabulary_size"],
        "num_hidden_layers": config["num_layers"],
        "num_attention_heads": config["num_heads"],
        "hidden_size": config["hidden_dim"],
        "word_embed_proj_dim": (
            config.get("token_embedding_dim") or config["hidden_dim"]
        ),
        "ffn_dim": config["intermediate_dim"],
        "max_position_embeddings": config["max_sequence_length"],
        "dropout": config["dropout"],
        "activation_function": "relu",
        "do_layer_norm_before": config.get("normalize_first", True),
        "_remove_final_layer_norm": False,
        "enable_bias": True,
        "layer_norm_elementwise_affine": True,
        "tie_word_embeddings": True,
    }


OPT = register_family(
    HuggingFaceFamily(
        model_type="opt",
        backbone="OPTBackbone",
        architectures=("OPTForCausalLM",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=WEIGHTS,
        ignored_fields=(
            # Training only: our one rate is `dropout`.
            "attention_dropout",
            "activation_dropout",
            "layerdrop",
            "init_std",
        ),
        ignorable_tensors=(
            r"lm_head\.weight",
            # Read when our model has the final LayerNorm (pre-norm); a
            # post-norm model has none, and `transformers` skips it too.
            r"model\.decoder\.final_layer_norm\.(weight|bias)",
        ),
    )
)
