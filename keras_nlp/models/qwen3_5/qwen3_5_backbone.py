"""Qwen 3.5 decoder backbone (text): linear and full attention blocks."""

import keras

from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import MODEL
from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.gated_delta_net import CONV_DIMS
from keras_nlp.layers.gated_delta_net import GATE_DIMS
from keras_nlp.layers.gated_delta_net import HEAD_SCALAR_DIMS
from keras_nlp.layers.gated_delta_net import OUTPUT_DIMS
from keras_nlp.layers.gated_delta_net import PER_HEAD_DIMS
from keras_nlp.layers.gated_delta_net import QKV_DIMS
from keras_nlp.layers.gated_delta_net import GatedDeltaNet
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.layers.rotary_embedding import RotaryEmbedding
from keras_nlp.layers.token_and_position_embedding import token_embedding
from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.decoder import init_decoder_graph
from keras_nlp.models.qwen3_5.qwen3_5_decoder_block import LAYER_TYPES
from keras_nlp.models.qwen3_5.qwen3_5_decoder_block import MIXER_NAMES
from keras_nlp.models.qwen3_5.qwen3_5_decoder_block import Qwen3_5DecoderBlock
from keras_nlp.models.qwen3_5.qwen3_5_presets import QWEN3_5_PRESETS

BLOCK = r"transformer_layer_\d+/"


def qwen3_5_layer_types(num_layers, layer_types):
    """Each block's kind: `layer_types`, or every fourth block full
    attention and the others linear attention (keras-hub's default).

    Raises:
        ValueError: `layer_types` is not `num_layers` of `LAYER_TYPES`.
    """
    if layer_types is None:
        return [
            "full_attention" if (i + 1) % 4 == 0 else "linear_attention"
            for i in range(num_layers)
        ]
    if (
        not isinstance(layer_types, (list, tuple))
        or len(layer_types) != num_layers
        or not all(kind in LAYER_TYPES for kind in layer_types)
    ):
        raise ValueError(
            f"`layer_types` must be a list of {num_layers} (num_layers) of "
            f"{LAYER_TYPES}, or None. Received: layer_types={layer_types!r}."
        )
    return list(layer_types)


def check_text_only(name, vision_encoder):
    """Raises unless `vision_encoder` is `None` (text backbones only)."""
    if vision_encoder is not None:
        raise ValueError(
            f"{name} builds the text decoder only: `vision_encoder` must be "
            f"None. Received: vision_encoder={vision_encoder!r}."
        )


def qwen3_5_attention(arguments, kernel_initializer):
    """A full attention block's mixer: grouped-query attention whose query
    kernel also makes a gate per head feature (`gated_query`), with query
    and key heads RMS-normalized (`1 + scale` gains) and RoPE on the first
    `partial_rotary_factor` of each head (`rotary_dim`); the variables are
    keras-hub's (`query`, `key`, `value`, `attention_output`,
    `query_norm`, `key_norm`).

    Args:
        arguments: the backbone constructor's `locals()`.
        kernel_initializer: the kernels' initializer.
    """
    a = arguments
    head_dim, factor = a["head_dim"], a["partial_rotary_factor"]
    rotary_dim = int(head_dim * factor)
    if not 0 < factor <= 1 or rotary_dim % 2:
        raise ValueError(
            "`partial_rotary_factor` must be in (0, 1] and turn an even "
            "number of features, int(head_dim * partial_rotary_factor). "
            f"Received: partial_rotary_factor={factor!r} with head_dim="
            f"{head_dim} ({rotary_dim} features)."
        )
    return CachedGroupedQueryAttention(
        num_query_heads=a["num_query_heads"],
        num_key_value_heads=a["num_key_value_heads"],
        head_dim=head_dim,
        rotary_embedding=RotaryEmbedding(
            max_wavelength=a["rope_max_wavelength"],
            scaling_factor=a["rope_scaling_factor"],
            dtype=a["dtype"],
        ),
        use_query_key_norm=True,
        zero_centered_query_key_norm=True,
        layer_norm_epsilon=a["layer_norm_epsilon"],
        sliding_window_size=a["sliding_window_size"],
        dropout=a["dropout"],
        kernel_initializer=kernel_initializer,
        sublayer_names={"query_norm": "query_norm", "key_norm": "key_norm"},
        gated_query=True,
        rotary_dim=rotary_dim,
        dtype=a["dtype"],
        name=MIXER_NAMES["full_attention"],
    )


def build_qwen3_5_stack(backbone, arguments, feedforward):
    """Builds a Qwen 3.5 (or Qwen 3.5 MoE) backbone's layers and graph.

    Args:
        backbone: the backbone under construction.
        arguments: its constructor's `locals()`.
        feedforward: `index -> (intermediate_dim, feedforward layer or
            None)` for block `index`.
    """
    a = arguments
    dtype = a["dtype"]
    kinds = qwen3_5_layer_types(a["num_layers"], a["layer_types"])
    initializer = keras.initializers.RandomNormal(stddev=0.02)

    def block(index):
        if kinds[index] == "linear_attention":
            mixer = GatedDeltaNet(
                hidden_size=a["hidden_dim"],
                linear_num_key_heads=a["linear_num_key_heads"],
                linear_num_value_heads=a["linear_num_value_heads"],
                linear_key_head_dim=a["linear_key_head_dim"],
                linear_value_head_dim=a["linear_value_head_dim"],
                linear_conv_kernel_dim=a["linear_conv_kernel_dim"],
                layer_norm_epsilon=a["layer_norm_epsilon"],
                kernel_initializer=initializer,
                dtype=dtype,
                name=MIXER_NAMES["linear_attention"],
            )
        else:
            mixer = qwen3_5_attention(a, initializer)
        intermediate_dim, moe = feedforward(index)
        return Qwen3_5DecoderBlock(
            mixer,
            hidden_dim=a["hidden_dim"],
            intermediate_dim=intermediate_dim,
            feedforward=moe,
            layer_norm_epsilon=a["layer_norm_epsilon"],
            dropout=a["dropout"],
            kernel_initializer=initializer,
            dtype=dtype,
            name=f"transformer_layer_{index}",
        )

    backbone.token_embedding = token_embedding(
        a["vocabulary_size"],
        a["hidden_dim"],
        tie_weights=a["tie_word_embeddings"],
        dtype=dtype,
    )
    backbone.transformer_layers = [block(i) for i in range(a["num_layers"])]
    backbone.layer_norm = ZeroCenteredRMSNormalization(
        epsilon=a["layer_norm_epsilon"],
        dtype=dtype,
        name="sequence_output_layernorm",
    )
    init_decoder_graph(
        backbone,
        embed=backbone.token_embedding,
        blocks=backbone.transformer_layers,
        final_norm=backbone.layer_norm,
        dtype=dtype,
        **a["kwargs"],
    )


def qwen3_5_rules(config, feedforward):
    """Layout rules of a Qwen 3.5 (or MoE) backbone; `feedforward` are
    the feed-forward's rules.

    Full attention: heads on the model axis, hidden on the data axis
    (hidden on both where the key/value heads do not divide). Linear
    attention: each value head's z, b, a projections, `A_log`, `dt_bias`
    and output rows on the model axis. The fused `in_proj_qkv` kernel
    holds all query heads, then all key heads, then all value heads
    (keras-hub's and Hugging Face's order): its columns are split over
    the model axis as they lie, so each device projects whole heads (of
    one part or two; the presets' head sizes of 128 divide every split of
    8 or fewer) with no all-reduce, and the depthwise convolution's
    channels are split with them (its decoding state too), so it runs
    where its inputs are. Keeping the columns whole and splitting hidden
    instead costs twice the forward pass's collective bytes on 1x8
    (`benchmarks/fused_qkv_split.md`). Where the model axis does not
    divide the columns, they stay whole and hidden is split over both
    axes.
    """
    attention = BLOCK + MIXER_NAMES["full_attention"] + "/"
    linear = BLOCK + MIXER_NAMES["linear_attention"] + "/"
    heads = {"linear_value_heads": MODEL, "hidden": DATA}
    whole = {"hidden": (DATA, MODEL)}
    return [
        *token_embedding_rules(
            "token_embedding/", tied=config.get("tie_word_embeddings", False)
        ),
        *attention_rules(attention, hidden_if_heads_indivisible=True),
        named_rule(
            linear + "in_proj_qkv/kernel",
            QKV_DIMS,
            {"linear_qkv": MODEL, "hidden": DATA},
            whole,
        ),
        named_rule(linear + "in_proj_z/kernel", GATE_DIMS, heads, whole),
        named_rule(
            linear + "in_proj_(a|b)/kernel", HEAD_SCALAR_DIMS, heads, {}
        ),
        named_rule(linear + "out_proj/kernel", OUTPUT_DIMS, heads, whole),
        named_rule(linear + "(A_log|dt_bias)", PER_HEAD_DIMS, heads, {}),
        named_rule(
            linear + "conv1d_kernel", CONV_DIMS, {"linear_qkv": MODEL}, {}
        ),
        *feedforward,
    ]


class Qwen3_5Backbone(Backbone):
    """Qwen 3.5's text decoder mapping token ids to hidden states.

    Pre-norm blocks (RMS norms with `1 + scale` gains) of two kinds: most
    mix tokens with Gated DeltaNet linear attention
    (`keras_nlp.layers.gated_delta_net.GatedDeltaNet`: a causal
    convolution, then a decayed delta-rule memory per value head), and
    every fourth (or as `layer_types` says) with grouped-query attention
    whose query and key heads are RMS-normalized, whose RoPE turns the
    first `partial_rotary_factor` of each head, and whose output is gated
    by `sigmoid` of a second query projection. Each block ends in a SwiGLU.

    This is the text backbone: keras-hub's vision encoder is not built
    (passing one raises). Without image tokens keras-hub's M-RoPE is plain
    RoPE, so `mrope_section` is kept for the signature only. Variable
    paths and shapes are keras-hub's.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of blocks.
        num_query_heads: int. Query heads of the full attention blocks.
        num_key_value_heads: int. Their key/value heads.
        head_dim: int. Their head size.
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of the SwiGLU.
        layer_types: list of `"linear_attention"` / `"full_attention"`,
            one per block, or `None`: every fourth block full. Defaults to
            `None`.
        partial_rotary_factor: float. Fraction of each head RoPE turns.
            Defaults to `0.25`.
        rope_max_wavelength: float. Defaults to `10000`.
        rope_scaling_factor: float. Defaults to `1.0`.
        layer_norm_epsilon: float. Defaults to `1e-6`.
        dropout: float. Defaults to `0`.
        tie_word_embeddings: bool. Defaults to `False`.
        sliding_window_size: int or `None`. Full attention sees the last
            this many positions; `None` sees all. Defaults to `32768`,
            as keras-hub; the presets use `None`.
        linear_num_key_heads: int. Query/key heads of the linear
            attention. Defaults to `16`.
        linear_num_value_heads: int. Its value heads. Defaults to `32`.
        linear_key_head_dim: int. Defaults to `128`.
        linear_value_head_dim: int. Defaults to `128`.
        linear_conv_kernel_dim: int. Width of its causal convolution.
            Defaults to `4`.
        vision_encoder: must be `None`. Defaults to `None`.
        mrope_section: list or `None`. No effect on text. Defaults to
            `None`.
        dtype: string or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.qwen3_5 import Qwen3_5Backbone

    model = Qwen3_5Backbone(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        hidden_dim=32,
        intermediate_dim=48,
        layer_types=["linear_attention", "full_attention"],
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=8,
        linear_value_head_dim=8,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    ```
    """

    presets = QWEN3_5_PRESETS

    @staticmethod
    def _layout_rules(config):
        return qwen3_5_rules(config, feedforward_rules(BLOCK))

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_query_heads,
        num_key_value_heads,
        head_dim,
        hidden_dim,
        intermediate_dim,
        layer_types=None,
        partial_rotary_factor=0.25,
        rope_max_wavelength=10000,
        rope_scaling_factor=1.0,
        layer_norm_epsilon=1e-6,
        dropout=0.0,
        tie_word_embeddings=False,
        sliding_window_size: int | None = 32768,
        linear_num_key_heads=16,
        linear_num_value_heads=32,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
        vision_encoder=None,
        mrope_section=None,
        dtype=None,
        **kwargs,
    ):
        check_text_only("Qwen3_5Backbone", vision_encoder)
        build_qwen3_5_stack(
            self, locals(), lambda index: (intermediate_dim, None)
        )
