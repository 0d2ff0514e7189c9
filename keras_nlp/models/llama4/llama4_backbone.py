"""Llama 4 (text) decoder backbone."""

import keras

from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import sparse_moe_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.families.llama import BLOCK
from keras_nlp.models.families.llama import build_decoder_stack
from keras_nlp.models.families.llama import check_llama_style_arguments
from keras_nlp.models.families.llama import llama_style_rules
from keras_nlp.models.llama4.llama4_layers import SHARED_EXPERT
from keras_nlp.models.llama4.llama4_layers import Llama4Attention
from keras_nlp.models.llama4.llama4_layers import Llama4RotaryEmbedding
from keras_nlp.models.llama4.llama4_layers import Llama4SparseMoE
from keras_nlp.models.llama4.llama4_presets import LLAMA4_PRESETS

MOE_BLOCK = "llama4_sparse_moe_block"
# Every fourth block has no RoPE, unless `no_rope_layers` says otherwise.
NO_ROPE_LAYER_INTERVAL = 4


def moe_layers_of(num_layers, interleave_moe_layer_step, moe_layers=None):
    """Indices of the mixture-of-experts blocks: `moe_layers` if given,
    else every `interleave_moe_layer_step`-th block, the last of each step
    (step 2: blocks 1, 3, 5, ...), as Hugging Face's `Llama4TextConfig`."""
    if moe_layers is not None:
        bad = [i for i in moe_layers if not 0 <= i < num_layers]
        if bad:
            raise ValueError(
                "`moe_layers` lists block indices in [0, num_layers) = "
                f"[0, {num_layers}). Received: moe_layers={moe_layers!r}."
            )
        return sorted(moe_layers)
    if not isinstance(interleave_moe_layer_step, int) or (
        interleave_moe_layer_step < 1
    ):
        raise ValueError(
            "`interleave_moe_layer_step` must be a positive integer. "
            "Received: "
            f"interleave_moe_layer_step={interleave_moe_layer_step!r}."
        )
    step = interleave_moe_layer_step
    return list(range(step - 1, num_layers, step))


def rope_layers_of(num_layers, no_rope_layers=None):
    """`no_rope_layers` (1 where a block uses RoPE), or the default: every
    fourth block (3, 7, ...) without."""
    if no_rope_layers is None:
        return [
            int((index + 1) % NO_ROPE_LAYER_INTERVAL != 0)
            for index in range(num_layers)
        ]
    if len(no_rope_layers) != num_layers or any(
        value not in (0, 1) for value in no_rope_layers
    ):
        raise ValueError(
            "`no_rope_layers` has one 0 or 1 per block (1: the block uses "
            f"RoPE). Received: no_rope_layers={no_rope_layers!r} for "
            f"num_layers={num_layers}."
        )
    return [int(value) for value in no_rope_layers]


class Llama4Backbone(Backbone):
    """Llama 4's text decoder mapping token ids to final-normalized states.

    Pre-norm RMSNorm blocks of grouped-query attention and a feed-forward,
    an untied output projection. Per block `i`:

    - RoPE blocks (`no_rope_layers[i] == 1`) rotate queries and keys with
      Meta's interleaved-pair RoPE (`Llama4RotaryEmbedding`), then, with
      `use_qk_norm`, divide them by their root mean square (no weight),
      and attend only within chunks of `attention_chunk_size` tokens.
    - NoPE blocks (the others; by default every fourth) attend to the
      whole causal prefix without positions; with
      `attn_temperature_tuning` the query at position `p` is multiplied by
      `log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1`.
    - Mixture-of-experts blocks (`moe_layers_of`) route each token to its
      `top_k` of `num_experts` SwiGLU experts of width `intermediate_dim`,
      the sigmoid of the router logit scaling the expert's input, and add
      a shared SwiGLU expert of the same width (`Llama4SparseMoE`); the
      other blocks have a dense SwiGLU of width `intermediate_dim_mlp`.

    keras-hub has no Llama 4. The arguments are Hugging Face's
    `Llama4TextConfig` fields under this library's Llama names
    (`vocab_size` -> `vocabulary_size`, `num_hidden_layers` ->
    `num_layers`, `num_attention_heads` -> `num_query_heads`,
    `hidden_size` -> `hidden_dim`, `intermediate_size` ->
    `intermediate_dim`, `intermediate_size_mlp` -> `intermediate_dim_mlp`,
    `num_local_experts` -> `num_experts`, `num_experts_per_tok` -> `top_k`,
    `rope_theta` -> `rope_max_wavelength`, `rms_norm_eps` ->
    `layer_norm_epsilon`, the llama3 `rope_scaling` as `LlamaBackbone`'s
    `rope_*` arguments); the others keep their names. Variable paths are
    Llama's in this library: `transformer_layer_{i}/self_attention/query/
    kernel` `(hidden, heads, head_dim)`, `.../feedforward_gate_dense/kernel`
    (dense blocks), `.../llama4_sparse_moe_block/sparse_feedforward_gate_
    dense/kernel` (router), `.../experts/expert_feedforward_gate_dense`
    `(experts, hidden, 2 * intermediate_dim)` (gate, then up: Hugging
    Face's `gate_up_proj`), `.../experts/expert_feedforward_output_dense`
    and `.../shared_expert_dense/feedforward_{gate,intermediate,output}_
    dense/kernel`.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        num_query_heads: int. Query heads per attention layer.
        num_key_value_heads: int. Key/value heads; must divide
            `num_query_heads`.
        hidden_dim: int. Width of the residual stream.
        intermediate_dim: int. Width of each routed expert and the shared
            expert.
        intermediate_dim_mlp: int. Width of the dense blocks' SwiGLU.
        num_experts: int. Routed experts per MoE block.
        head_dim: int or `None`. Size of each head; `None` means
            `hidden_dim // num_query_heads`.
        top_k: int. Experts per token. Defaults to `1`.
        interleave_moe_layer_step: int. Every `step`-th block is MoE.
            Defaults to `1`.
        moe_layers: list of block indices, or `None` for the step's.
        no_rope_layers: list of `num_layers` 0/1 (1: RoPE, chunked), or
            `None` for every fourth block without RoPE.
        attention_chunk_size: int or `None`. Chunk of the RoPE blocks'
            local attention; `None` attends to the whole prefix.
        use_qk_norm: bool. Weightless RMS norm of queries and keys after
            RoPE on the RoPE blocks.
        attn_temperature_tuning: bool. Query temperature on NoPE blocks.
        floor_scale: float. Defaults to `8192`.
        attn_scale: float. Defaults to `0.1`.
        rope_max_wavelength: float. RoPE base. Defaults to `500000`.
        rope_frequency_adjustment_factor, rope_low_freq_factor,
            rope_high_freq_factor, rope_pretraining_sequence_length:
            Llama 3.1-style RoPE scaling (`LlamaRotaryEmbedding`); all or
            none. Default `None`.
        max_position_embeddings: int. Recorded (no weight depends on it).
        layer_norm_epsilon: float. Epsilon of the RMS norms (and of the
            query/key norm). Defaults to `1e-5`.
        dropout: float. Dropout rate in training. Defaults to `0`.
        tie_word_embeddings: bool. Defaults to `False`.
        dtype: string or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.llama4 import Llama4Backbone

    model = Llama4Backbone(
        vocabulary_size=64,
        num_layers=4,
        num_query_heads=4,
        num_key_value_heads=2,
        hidden_dim=32,
        intermediate_dim=16,
        intermediate_dim_mlp=48,
        num_experts=4,
        interleave_moe_layer_step=2,
        attention_chunk_size=2,
        use_qk_norm=True,
        attn_temperature_tuning=True,
        floor_scale=2,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    ```
    """

    presets = LLAMA4_PRESETS
    lora_target_names = ("query", "value")

    @staticmethod
    def _layout_rules(config):
        num_layers = config["num_layers"]
        moe = moe_layers_of(
            num_layers,
            config.get("interleave_moe_layer_step", 1),
            config.get("moe_layers"),
        )
        prefix = BLOCK + MOE_BLOCK + "/"
        feedforward = []
        if moe:
            # Routed experts on the expert axis (the model axis without
            # one); the shared expert like a dense feed-forward.
            feedforward += sparse_moe_rules(
                prefix, fused_gate_intermediate=True
            )
            feedforward += feedforward_rules(prefix + SHARED_EXPERT + "/")
        if len(moe) < num_layers:
            feedforward += feedforward_rules(BLOCK)
        return llama_style_rules(
            tied=config.get("tie_word_embeddings", False),
            feedforward=feedforward,
            hidden_if_heads_indivisible=True,
        )

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_query_heads,
        num_key_value_heads,
        hidden_dim,
        intermediate_dim,
        intermediate_dim_mlp,
        num_experts,
        head_dim: int | None = None,
        top_k=1,
        interleave_moe_layer_step=1,
        moe_layers=None,
        no_rope_layers=None,
        attention_chunk_size: int | None = 8192,
        use_qk_norm=True,
        attn_temperature_tuning=True,
        floor_scale=8192,
        attn_scale=0.1,
        rope_max_wavelength=500000.0,
        rope_frequency_adjustment_factor=None,
        rope_low_freq_factor=None,
        rope_high_freq_factor=None,
        rope_pretraining_sequence_length=None,
        max_position_embeddings=131072,
        layer_norm_epsilon=1e-5,
        dropout=0.0,
        tie_word_embeddings=False,
        dtype=None,
        **kwargs,
    ):
        check_llama_style_arguments(hidden_dim, num_query_heads, head_dim)
        moe = set(
            moe_layers_of(num_layers, interleave_moe_layer_step, moe_layers)
        )
        rope = rope_layers_of(num_layers, no_rope_layers)
        initializer = keras.initializers.RandomNormal(stddev=0.02)

        def attention(index):
            rotary = None
            if rope[index]:
                rotary = Llama4RotaryEmbedding(
                    max_wavelength=rope_max_wavelength,
                    frequency_adjustment_factor=rope_frequency_adjustment_factor,
                    low_freq_factor=rope_low_freq_factor,
                    high_freq_factor=rope_high_freq_factor,
                    pretraining_sequence_length=rope_pretraining_sequence_length,
                    dtype=dtype,
                    name="rotary_embedding",
                )
            return Llama4Attention(
                num_query_heads=num_query_heads,
                num_key_value_heads=num_key_value_heads,
                head_dim=head_dim,
                rotary_embedding=rotary,
                chunk_size=attention_chunk_size if rope[index] else None,
                normalize_rotated=bool(use_qk_norm and rope[index]),
                temperature_tuning=bool(
                    attn_temperature_tuning and not rope[index]
                ),
                floor_scale=floor_scale,
                attn_scale=attn_scale,
                layer_norm_epsilon=layer_norm_epsilon,
                dropout=dropout,
                kernel_initializer=initializer,
                dtype=dtype,
                name="self_attention",
            )

        def feedforward(index):
            if index not in moe:
                return None
            return Llama4SparseMoE(
                num_experts=num_experts,
                intermediate_dim=intermediate_dim,
                shared_intermediate_dim=intermediate_dim,
                top_k=top_k,
                fused_gate_intermediate=True,
                kernel_initializer=initializer,
                dtype=dtype,
                name=MOE_BLOCK,
            )

        build_decoder_stack(
            self,
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            hidden_dim=hidden_dim,
            attention=attention,
            intermediate_dim=intermediate_dim_mlp,
            feedforward=feedforward,
            layer_norm_epsilon=layer_norm_epsilon,
            dropout=dropout,
            tie_word_embeddings=tie_word_embeddings,
            kernel_initializer=initializer,
            dtype=dtype,
            **kwargs,
        )
