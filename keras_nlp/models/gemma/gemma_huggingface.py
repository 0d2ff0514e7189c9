"""Hugging Face `gemma` and `gemma2` checkpoints (Gemma, CodeGemma, Gemma 2).

Both load as a `GemmaBackbone`: a `gemma2` config sets its Gemma 2 options
(post-attention and post-feed-forward norms, logit soft caps, sliding
windows on every other layer). Export writes `gemma2` for a backbone with
the post-norms and `gemma` for one without.

Facts the translation rests on (from `transformers`' Gemma and Gemma 2
configs and models):

- Norm weights are stored as offsets from 1 (`x * (1 + w)`), as our
  zero-centered norms hold them: copied unchanged.
- `intermediate_size` is one feed-forward branch; ours counts both.
- Queries are scaled by `head_dim ** -0.5` (Gemma) or
  `query_pre_attn_scalar ** -0.5` (Gemma 2): `head_dim` and
  `hidden_size // num_attention_heads` are `query_head_dim_normalize`
  (keras-hub's flag), any other positive value the backbone's
  `query_pre_attn_scalar`; export writes the scalar back.
- Gemma 1.0's configs say `"hidden_act": "gelu"`, but the models were
  trained with the tanh approximation that `transformers` used for them
  until late 2024 (and that keras-hub and we use): `"gelu"` is read as
  that. A `hidden_activation` field, where present, is what counts.
- The output projection is the token embedding (tied); an `lm_head.weight`
  copy is ignored.
"""

import math

from keras_nlp.saving.huggingface import KERNEL
from keras_nlp.saving.huggingface import HuggingFaceFamily
from keras_nlp.saving.huggingface import Merge
from keras_nlp.saving.huggingface import Transpose
from keras_nlp.saving.huggingface import Weight
from keras_nlp.saving.huggingface import attention_rows
from keras_nlp.saving.huggingface import register_family
from keras_nlp.saving.huggingface.fields import read_rope
from keras_nlp.saving.huggingface.fields import read_sizes
from keras_nlp.saving.huggingface.fields import whole_as_int
from keras_nlp.saving.huggingface.fields import windowed_layers
from keras_nlp.saving.huggingface.fields import write_sizes

# Our heads-first query/key/value kernels `(heads, hidden, head_dim)` are
# Hugging Face's `(heads * head_dim, hidden)`.
HEADS_FIRST_KERNEL = (Transpose((0, 2, 1)), Merge(0))

GEMMA_ROPE_WAVELENGTH = 10_000.0
APPROXIMATE_GELU = "gelu_pytorch_tanh"

GEMMA_IGNORED_FIELDS = (
    # Only bounds positions; RoPE tables are computed for any length.
    "max_position_embeddings",
    # Generation-time cache choice (Gemma 2 and 3).
    "cache_implementation",
)
GEMMA_IGNORABLE = (
    r"(model\.)?layers\.\d+\.self_attn\.rotary_emb\.inv_freq",
    # The tied output projection, when a checkpoint stores it.
    r"lm_head\.weight",
)


def gemma_weights(prefix="model.", gemma2_norms=False, query_key_norm=False):
    """The tensor table of a Gemma-style decoder (`build_gemma_stack`).

    Args:
        prefix: the text model's tensor prefix.
        gemma2_norms: Gemma 2 and 3 norm names (`pre_feedforward_layernorm`
            before the feed-forward; `post_attention_layernorm` after the
            attention). Gemma's `post_attention_layernorm` is the norm
            before its feed-forward.
        query_key_norm: rows for the query and key norms (Gemma 3).
    """
    block = "decoder_block_{i}/"
    layer = prefix + "layers.{i}."
    rows = [
        Weight("token_embedding/embeddings", prefix + "embed_tokens.weight"),
        Weight(
            block + "pre_attention_norm/scale",
            layer + "input_layernorm.weight",
        ),
        Weight(
            block + "pre_ffw_norm/scale",
            layer
            + (
                "pre_feedforward_layernorm.weight"
                if gemma2_norms
                else "post_attention_layernorm.weight"
            ),
        ),
        Weight(
            block + "ffw_gating/kernel", layer + "mlp.gate_proj.weight", KERNEL
        ),
        Weight(
            block + "ffw_gating_2/kernel", layer + "mlp.up_proj.weight", KERNEL
        ),
        Weight(
            block + "ffw_linear/kernel", layer + "mlp.down_proj.weight", KERNEL
        ),
        Weight("final_normalization/scale", prefix + "norm.weight"),
    ]
    rows += attention_rows(
        block + "attention", layer + "self_attn", kernel_ops=HEADS_FIRST_KERNEL
    )
    if gemma2_norms:
        rows += [
            Weight(
                block + "post_attention_norm/scale",
                layer + "post_attention_layernorm.weight",
            ),
            Weight(
                block + "post_ffw_norm/scale",
                layer + "post_feedforward_layernorm.weight",
            ),
        ]
    if query_key_norm:
        rows += [
            Weight(
                block + "attention/query_norm/scale",
                layer + "self_attn.q_norm.weight",
            ),
            Weight(
                block + "attention/key_norm/scale",
                layer + "self_attn.k_norm.weight",
            ),
        ]
    return rows


def read_gemma_common(hf):
    """The fields Gemma, Gemma 2 and Gemma 3 share, as our arguments.

    `intermediate_dim` is one feed-forward branch (Gemma 3's meaning).
    """
    sizes = read_sizes(hf, grouped=True)
    hf.expect("attention_bias", (False,), default=False)
    hf.expect("tie_word_embeddings", (True,), default=True)
    return {
        **sizes,
        "head_dim": hf.require("head_dim"),
        "layer_norm_epsilon": hf.get("rms_norm_eps", 1e-6),
        "dropout": hf.get("attention_dropout", 0.0),
    }


def write_gemma_common(config, intermediate_size):
    """`config.json` fields of what `read_gemma_common` reads."""
    return {
        **write_sizes(config, grouped=True),
        "intermediate_size": intermediate_size,
        "head_dim": config["head_dim"],
        "rms_norm_eps": config["layer_norm_epsilon"],
        "attention_dropout": config["dropout"],
        "attention_bias": False,
        "tie_word_embeddings": True,
    }


def read_query_scale(hf, config, default):
    """Our query scale arguments from `query_pre_attn_scalar`.

    `head_dim` and `hidden_size // num_attention_heads` are
    `query_head_dim_normalize` (as keras-hub spells them); any other
    positive number is `query_pre_attn_scalar` itself.

    Returns:
        `{"query_head_dim_normalize": ..., "query_pre_attn_scalar": ...}`.
    """
    scalar = hf.get("query_pre_attn_scalar", default)
    head_dim = config["head_dim"]
    implied = config["hidden_dim"] // config["num_query_heads"]
    if scalar == head_dim:
        return {"query_head_dim_normalize": True, "query_pre_attn_scalar": None}
    if scalar == implied:
        return {
            "query_head_dim_normalize": False,
            "query_pre_attn_scalar": None,
        }
    if (
        isinstance(scalar, bool)
        or not isinstance(scalar, (int, float))
        or not math.isfinite(scalar)
        or scalar <= 0
    ):
        hf.unsupported(
            "query_pre_attn_scalar",
            scalar,
            why=" (queries are scaled by its inverse square root: it must "
            "be a positive number)",
        )
    return {"query_head_dim_normalize": True, "query_pre_attn_scalar": scalar}


def write_query_scale(config):
    """`query_pre_attn_scalar` of our config."""
    if config.get("query_pre_attn_scalar") is not None:
        return whole_as_int(config["query_pre_attn_scalar"])
    if config["query_head_dim_normalize"]:
        return config["head_dim"]
    return config["hidden_dim"] // config["num_query_heads"]


def read_activation(hf, legacy_gelu):
    """Checks the feed-forward activation (the tanh-approximated GELU).

    Args:
        legacy_gelu: whether `hidden_act: "gelu"` means the approximation
            (Gemma 1.0's configs) and `hidden_act` counts at all (Gemma 2
            and 3 read `hidden_activation` only).
    """
    activation = hf.get("hidden_activation")
    act = hf.get("hidden_act")
    if activation is not None:
        hf.expect("hidden_activation", (APPROXIMATE_GELU,))
    elif legacy_gelu and act is not None:
        hf.expect("hidden_act", (APPROXIMATE_GELU, "gelu"))


def read_window_pattern(hf, num_layers, pattern):
    """`use_sliding_window_attention` for a fixed window `pattern`
    (`index -> windowed`): every layer as the pattern says, or none."""
    windowed = windowed_layers(hf, num_layers, pattern)
    if not any(windowed):
        return False
    expected = [pattern(i) for i in range(num_layers)]
    if windowed != expected:
        hf.unsupported(
            "layer_types",
            hf.data.get("layer_types"),
            why=(
                " (windowed layers must be "
                f"{[i for i, w in enumerate(expected) if w]}, or none)"
            ),
        )
    return True


def write_window_pattern(config, pattern):
    use = config["use_sliding_window_attention"]
    return {
        "sliding_window": config["sliding_window_size"],
        "layer_types": [
            "sliding_attention" if use and pattern(i) else "full_attention"
            for i in range(config["num_layers"])
        ],
    }


def _gemma2_local(index):
    return index % 2 == 0


def _from_hf(hf):
    gemma2 = hf.data.get("model_type") == "gemma2"
    config = read_gemma_common(hf)
    # Ours counts both feed-forward branches.
    config["intermediate_dim"] *= 2
    read_activation(hf, legacy_gelu=not gemma2)
    theta, _, _ = read_rope(hf, ("default",), GEMMA_ROPE_WAVELENGTH)
    if theta != GEMMA_ROPE_WAVELENGTH:
        hf.unsupported(
            "rope_theta",
            theta,
            [GEMMA_ROPE_WAVELENGTH],
            why=" (fixed in Gemma)",
        )
    hf.expect("use_bidirectional_attention", (False,), default=False)
    if not gemma2:
        config["query_head_dim_normalize"] = True
        return config
    hf.get("hidden_act")  # Gemma 2 models read hidden_activation only.
    window = hf.get("sliding_window", 4096)
    size = hf.get("sliding_window_size", window)
    if size != window:
        hf.unsupported(
            "sliding_window_size", size, [window], why=" (two window sizes)"
        )
    config.update(
        **read_query_scale(hf, config, 256),
        use_post_attention_norm=True,
        use_post_ffw_norm=True,
        attention_logit_soft_cap=hf.get("attn_logit_softcapping"),
        final_logit_soft_cap=hf.get("final_logit_softcapping"),
        use_sliding_window_attention=read_window_pattern(
            hf, config["num_layers"], _gemma2_local
        ),
        sliding_window_size=window,
    )
    return config


def _to_hf(config):
    post_attention = config["use_post_attention_norm"]
    post_ffw = config["use_post_ffw_norm"]
    if post_attention != post_ffw:
        raise ValueError(
            "Hugging Face's Gemma has neither post-norm and Gemma 2 has both; "
            f"this backbone has use_post_attention_norm={post_attention} and "
            f"use_post_ffw_norm={post_ffw}."
        )
    fields = write_gemma_common(config, config["intermediate_dim"] // 2)
    fields.update(
        rope_theta=GEMMA_ROPE_WAVELENGTH, max_position_embeddings=8192
    )
    if post_ffw:
        return {
            **fields,
            "model_type": "gemma2",
            "architectures": ["Gemma2ForCausalLM"],
            "hidden_activation": APPROXIMATE_GELU,
            "query_pre_attn_scalar": write_query_scale(config),
            "attn_logit_softcapping": config["attention_logit_soft_cap"],
            "final_logit_softcapping": config["final_logit_soft_cap"],
            **write_window_pattern(config, _gemma2_local),
        }
    gemma2_only = {
        "query_head_dim_normalize": (config["query_head_dim_normalize"], True),
        "query_pre_attn_scalar": (config.get("query_pre_attn_scalar"), None),
        "attention_logit_soft_cap": (config["attention_logit_soft_cap"], None),
        "final_logit_soft_cap": (config["final_logit_soft_cap"], None),
        "use_sliding_window_attention": (
            config["use_sliding_window_attention"],
            False,
        ),
    }
    for name, (value, plain) in gemma2_only.items():
        if value != plain:
            raise ValueError(
                f"Hugging Face's Gemma (without post-norms) has no {name}="
                f"{value!r}; only Gemma 2 (use_post_attention_norm=True and "
                "use_post_ffw_norm=True) has."
            )
    return {
        **fields,
        "hidden_act": APPROXIMATE_GELU,
        "hidden_activation": APPROXIMATE_GELU,
    }


def _weights(config):
    return gemma_weights(gemma2_norms=config.get("use_post_ffw_norm", False))


GEMMA = register_family(
    HuggingFaceFamily(
        model_type=("gemma", "gemma2"),
        backbone="GemmaBackbone",
        architectures=("GemmaForCausalLM",),
        config_from_hf=_from_hf,
        config_to_hf=_to_hf,
        weights=_weights,
        ignored_fields=GEMMA_IGNORED_FIELDS,
        ignorable_tensors=GEMMA_IGNORABLE,
    )
)
