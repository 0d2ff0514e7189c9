"""SmolLM3 decoder backbone."""

from keras_nlp.layers.gated_feedforward import GatedFeedForward
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.rotary_embedding import RotaryEmbedding
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.families.llama import BLOCK
from keras_nlp.models.families.llama import build_llama_style
from keras_nlp.models.families.llama import llama_style_rules
from keras_nlp.models.smollm3.smollm3_presets import SMOLLM3_PRESETS

# keras-hub's names, which are the variable paths:
# `transformer_layer_{i}/self_attn/q_proj/kernel`, `.../mlp/gate_proj/...`.
ATTENTION_NAMES = {
    "query": "q_proj",
    "key": "k_proj",
    "value": "v_proj",
    "output": "o_proj",
}
FEEDFORWARD_NAMES = {
    "gate": "gate_proj",
    "intermediate": "up_proj",
    "output": "down_proj",
}
BLOCK_NAMES = {
    "attention_norm": "input_layernorm",
    "feedforward_norm": "post_attention_layernorm",
}


class SmolLM3Backbone(Backbone):
    """SmolLM3 decoder mapping token ids to final-normalized hidden states.

    Llama's architecture (pre-norm RMSNorm blocks, grouped-query attention,
    a SwiGLU feed-forward, a tied output embedding) where RoPE is switched
    off in chosen layers: `rope_layer_enabled_list[i]` says whether layer
    `i` rotates its queries and keys (SmolLM3-3B: every fourth layer does
    not). The query, key and value kernels are `(hidden, heads, head_dim)`,
    keras-hub's `(hidden, heads * head_dim)` with the heads a dimension of
    their own; keras-hub's RoPE frequencies (`rotary_emb/inv_freq`) are a
    constant of `rope_theta` here, not a variable.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        hidden_dim: int. Width of the residual stream; `head_dim` is
            `hidden_dim // num_attention_heads`.
        intermediate_dim: int. Width of the feed-forward.
        num_layers: int. Number of decoder blocks.
        num_attention_heads: int. Query heads per attention layer.
        num_key_value_heads: int. Key/value heads; must divide
            `num_attention_heads`.
        attention_bias: bool. Biases on the query, key and value
            projections (the output projection has none, as in keras-hub).
        attention_dropout: float. Dropout on the attention probabilities
            in training.
        rope_layer_enabled_list: list of `num_layers` bools, whether each
            layer applies RoPE.
        layer_types: list of `num_layers` strings, the layers' attention
            kinds as the checkpoint names them; every layer attends to the
            whole prefix (`"full_attention"`).
        mlp_bias: bool. Biases on the feed-forward projections.
        layer_norm_epsilon: float. Epsilon of the RMS norms.
        max_position_embeddings: int. The longest sequence the checkpoint
            was trained for (recorded; no weight depends on it).
        rope_theta: float. RoPE base.
        partial_rotary_factor: float. Fraction of each head RoPE rotates;
            only `1.0` (whole heads), the one keras-hub runs.
        dtype: string or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.smollm3 import SmolLM3Backbone

    model = SmolLM3Backbone(
        vocabulary_size=64,
        hidden_dim=32,
        intermediate_dim=64,
        num_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        attention_bias=False,
        attention_dropout=0.0,
        rope_layer_enabled_list=[True, True, True, False],
        layer_types=["full_attention"] * 4,
        mlp_bias=False,
        layer_norm_epsilon=1e-6,
        max_position_embeddings=128,
        rope_theta=10000.0,
        partial_rotary_factor=1.0,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    ```
    """

    presets = SMOLLM3_PRESETS
    lora_target_names = ("q_proj", "v_proj")

    @staticmethod
    def _layout_rules(config):
        feedforward = feedforward_rules(
            BLOCK + "mlp/", sublayer_names=FEEDFORWARD_NAMES
        )
        return llama_style_rules(
            tied=True,
            feedforward=feedforward,
            attention="self_attn",
            sublayer_names=ATTENTION_NAMES,
            use_bias=config.get("attention_bias", False),
            # smollm3_3b_en's 4 key/value heads on an 8-way model axis:
            # their kernels split hidden instead (a head is never split):
            # per-device parameters 1.172 -> 1.000 of the ideal on 1x8.
            hidden_if_heads_indivisible=True,
        )

    def __init__(
        self,
        vocabulary_size,
        hidden_dim,
        intermediate_dim,
        num_layers,
        num_attention_heads,
        num_key_value_heads,
        attention_bias,
        attention_dropout,
        rope_layer_enabled_list,
        layer_types,
        mlp_bias,
        layer_norm_epsilon,
        max_position_embeddings,
        rope_theta,
        partial_rotary_factor,
        *,
        dtype=None,
        **kwargs,
    ):
        for name, values in (
            ("rope_layer_enabled_list", rope_layer_enabled_list),
            ("layer_types", layer_types),
        ):
            if len(values) != num_layers:
                raise ValueError(
                    f"`{name}` must have one entry per layer. Received "
                    f"{len(values)} entries for num_layers={num_layers}."
                )
        if partial_rotary_factor != 1.0:
            raise ValueError(
                "Only whole heads are rotated: `partial_rotary_factor` must "
                f"be 1.0. Received: {partial_rotary_factor!r}."
            )
        # `build_llama_style` asks for one rotary embedding per block, in
        # order: layers without RoPE get none.
        enabled = iter(rope_layer_enabled_list)

        def rotary_embedding():
            if not next(enabled):
                return None
            return RotaryEmbedding(
                max_wavelength=rope_theta, dtype=dtype, name="rotary_embedding"
            )

        build_llama_style(
            self,
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            hidden_dim=hidden_dim,
            num_query_heads=num_attention_heads,
            num_key_value_heads=num_key_value_heads,
            rotary_embedding=rotary_embedding,
            feedforward=lambda index: GatedFeedForward(
                intermediate_dim,
                use_bias=mlp_bias,
                sublayer_names=FEEDFORWARD_NAMES,
                dtype=dtype,
                name="mlp",
            ),
            layer_norm_epsilon=layer_norm_epsilon,
            dropout=attention_dropout,
            tie_word_embeddings=True,
            attention_options={
                "use_bias": attention_bias,
                "sublayer_names": ATTENTION_NAMES,
            },
            attention_name="self_attn",
            block_names=BLOCK_NAMES,
            dtype=dtype,
            **kwargs,
        )
