"""Phi-3 decoder backbone."""

from keras_nlp.layers.rotary_embedding import RotaryEmbedding
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.families.llama import build_llama_style_from
from keras_nlp.models.families.llama import llama_style_rules
from keras_nlp.models.phi3.phi3_presets import PHI3_PRESETS
from keras_nlp.models.phi3.phi3_rotary_embedding import (
    Phi3SuScaledRotaryEmbedding,
)

# "longrope" is the later Hugging Face name of the same scheme.
ROPE_SCALING_TYPES = (None, "su", "longrope")
_BLOCK_NAMES = {
    "attention_norm": "pre_attention_layernorm",
    "feedforward_norm": "post_attention_layernorm",
}


class Phi3Backbone(Backbone):
    """Phi-3 decoder that maps token ids to final-normalized hidden states.

    Pre-norm blocks of RMSNorm, grouped-query self-attention with rotary
    position embedding and a SwiGLU feed-forward; the output embedding is
    untied. With `rope_scaling_type="su"` the rotary speeds are divided by
    per-frequency factors, the short list while the context fits in
    `pretraining_sequence_length` and the long list beyond it (LongRoPE,
    Phi-3 128k). With `sliding_window`, every layer's attention is
    restricted to a window, as Mistral's (Phi-3 mini 4k: 2047 tokens).

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of decoder blocks.
        hidden_dim: int. Width of the residual stream; `head_dim` is
            `hidden_dim // num_query_heads`.
        intermediate_dim: int. Width of the feed-forward.
        num_query_heads: int. Query heads per attention layer.
        num_key_value_heads: int. Key/value heads; must divide
            `num_query_heads`.
        layer_norm_epsilon: float. Epsilon of the RMS norms. Defaults to
            `1e-6`.
        dropout: float. Dropout rate in training. Defaults to `0`.
        max_sequence_length: int. Longest context the model is used with;
            with su scaling it sets the cosine/sine amplitude. Defaults to
            `4096`.
        pretraining_sequence_length: int. Context length of pretraining;
            with su scaling, longer contexts use the long factors. Defaults
            to `4096`.
        rope_max_wavelength: int. RoPE base. Defaults to `10000`.
        rope_scaling_type: `None` (plain RoPE) or `"su"` (alias
            `"longrope"`). Defaults to `None`.
        rope_scaling_short_factor: list of `head_dim // 2` floats, needed
            with su scaling.
        rope_scaling_long_factor: list of `head_dim // 2` floats, needed
            with su scaling.
        dtype: string or `keras.DTypePolicy`.
        sliding_window: int or `None`. Keyword-only. Attention window in
            tokens on every layer: a token attends to itself and the
            `sliding_window - 1` tokens before it. `None` attends to the
            whole causal prefix. Defaults to `None`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.phi3 import Phi3Backbone

    model = Phi3Backbone(
        vocabulary_size=64,
        num_layers=2,
        hidden_dim=32,
        intermediate_dim=64,
        num_query_heads=4,
        num_key_value_heads=4,
        max_sequence_length=32,
        pretraining_sequence_length=4,
        rope_scaling_type="su",
        rope_scaling_short_factor=[1.0, 1.1, 1.2, 1.3],
        rope_scaling_long_factor=[1.0, 2.0, 4.0, 8.0],
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    ```
    """

    presets = PHI3_PRESETS

    @staticmethod
    def _layout_rules(config):
        return llama_style_rules(tied=False, attention="attention")

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        hidden_dim,
        intermediate_dim,
        num_query_heads,
        num_key_value_heads,
        layer_norm_epsilon=1e-6,
        dropout=0.0,
        max_sequence_length=4096,
        pretraining_sequence_length=4096,
        rope_max_wavelength=10000,
        rope_scaling_type=None,
        rope_scaling_short_factor=None,
        rope_scaling_long_factor=None,
        dtype=None,
        *,
        sliding_window=None,
        **kwargs,
    ):
        # Not `head_dim`: `build_llama_style_from` would pass it on.
        rope_pairs = hidden_dim // num_query_heads // 2
        if rope_scaling_type not in ROPE_SCALING_TYPES:
            raise ValueError(
                f"`rope_scaling_type` must be one of {ROPE_SCALING_TYPES}. "
                f"Received: rope_scaling_type={rope_scaling_type!r}."
            )
        if rope_scaling_type is not None:
            for name, factors in (
                ("rope_scaling_short_factor", rope_scaling_short_factor),
                ("rope_scaling_long_factor", rope_scaling_long_factor),
            ):
                if factors is None or len(factors) != rope_pairs:
                    length = None if factors is None else len(factors)
                    raise ValueError(
                        f"With rope_scaling_type={rope_scaling_type!r}, "
                        f"`{name}` must list head_dim // 2 = {rope_pairs} "
                        f"factors. Received {length} "
                        f"({name}={factors!r})."
                    )
            rope_scaling_short_factor = list(rope_scaling_short_factor)
            rope_scaling_long_factor = list(rope_scaling_long_factor)

        def rotary_embedding():
            if rope_scaling_type is None:
                return RotaryEmbedding(
                    max_wavelength=rope_max_wavelength,
                    dtype=dtype,
                    name="rotary_embedding",
                )
            return Phi3SuScaledRotaryEmbedding(
                short_factor=rope_scaling_short_factor,
                long_factor=rope_scaling_long_factor,
                max_sequence_length=max_sequence_length,
                pretraining_sequence_length=pretraining_sequence_length,
                max_wavelength=rope_max_wavelength,
                dtype=dtype,
                name="rotary_embedding",
            )

        build_llama_style_from(
            self,
            locals(),
            rotary_embedding=rotary_embedding,
            attention_name="attention",
            block_names=_BLOCK_NAMES,
            attention_options={"sliding_window_size": sliding_window},
        )
