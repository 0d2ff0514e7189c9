"""Gemma 3 decoder backbone (text only)."""

from keras_nlp.models.backbone import Backbone
from keras_nlp.models.gemma.gemma_backbone import build_gemma_stack
from keras_nlp.models.gemma.gemma_backbone import gemma_layout_rules
from keras_nlp.models.gemma3.gemma3_presets import GEMMA3_PRESETS

# With sliding windows on, every sixth block (indices 5, 11, ...) attends
# globally and the other five locally.
GLOBAL_LAYER_PERIOD = 6
LOCAL_ROPE_WAVELENGTH = 10_000.0
GLOBAL_ROPE_WAVELENGTH = 1_000_000.0


def is_local_layer(index, use_sliding_window_attention):
    """Whether block `index` uses the sliding window (a "local" layer)."""
    return (
        use_sliding_window_attention
        and index % GLOBAL_LAYER_PERIOD < GLOBAL_LAYER_PERIOD - 1
    )


class Gemma3Backbone(Backbone):
    """Gemma 3 text decoder mapping token ids to normalized hidden states.

    Gemma 2's block (pre- and optional post-norms, GeGLU feed-forward,
    tied and scaled token embedding) with RMS-normalized query and key heads
    and interleaved attention: with `use_sliding_window_attention`, five
    local blocks (sliding window, RoPE wavelength 10k) alternate with one
    global block (full causal attention, RoPE wavelength 1M). Only the text
    model is supported: `vision_encoder` must be `None`, and the embedding
    model options of keras-hub's class are rejected.

    Args:
        vocabulary_size: int. Number of rows of the (tied) token embedding.
        image_size: int or `None`. Image resolution of the vision model;
            stored for config compatibility, unused by the text model.
        num_layers: int. Number of decoder blocks.
        num_query_heads: int. Query heads per attention layer.
        num_key_value_heads: int. Key/value heads per attention layer; must
            divide `num_query_heads` (1 gives multi-query attention).
        hidden_dim: int. Width of the residual stream and embeddings.
        intermediate_dim: int. Width of each feed-forward branch: the gating
            kernels are `(hidden_dim, intermediate_dim)`.
        head_dim: int. Size of each attention head.
        query_head_dim_normalize: bool. Scale queries by `head_dim ** -0.5`
            if `True`, else by `(hidden_dim // num_query_heads) ** -0.5`.
            Defaults to `True`.
        use_query_key_norm: bool. RMS-normalize each query and key head
            before the rotary embedding. Defaults to `True`.
        use_post_ffw_norm: bool. Normalize each feed-forward output before
            its residual add. Defaults to `False`.
        use_post_attention_norm: bool. Normalize each attention output before
            its residual add. Defaults to `False`.
        attention_logit_soft_cap: float or `None`. Soft cap applied to the
            attention logits as `cap * tanh(logits / cap)`. Defaults to
            `None`.
        final_logit_soft_cap: float or `None`. Soft cap applied by the token
            embedding when it projects hidden states back to vocabulary
            logits (`reverse=True`); it does not affect this model's output.
            Defaults to `None`.
        use_sliding_window_attention: bool. If `True`, all blocks but every
            sixth one attend only within a local window. Defaults to
            `False` (every block is global).
        sliding_window_size: int. Width of that window. Defaults to `1024`.
        local_rope_scaling_factor: float. RoPE position scaling of the local
            blocks. Defaults to `1.0`.
        global_rope_scaling_factor: float. RoPE position scaling of the
            global blocks. Defaults to `1.0`.
        vision_encoder: Must be `None` (text only).
        layer_norm_epsilon: float. Epsilon of every normalization. Defaults
            to `1e-6`.
        use_bidirectional_attention: bool. If `True`, tokens attend to
            tokens on both sides (sliding windows are centered). Defaults to
            `False`.
        dropout: float. Dropout rate used in training. Defaults to `0`.
        is_embedding_model: Must be `False` (not supported).
        pooling_intermediate_dim: Must be `None` (not supported).
        embedding_dim: Must be `None` (not supported).
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
            Normalizations and attention softmaxes always run in float32.
        **kwargs: Forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.gemma3.gemma3_backbone import Gemma3Backbone

    model = Gemma3Backbone(
        vocabulary_size=64,
        image_size=None,
        num_layers=6,
        num_query_heads=4,
        num_key_value_heads=1,
        hidden_dim=32,
        intermediate_dim=64,
        head_dim=8,
        use_sliding_window_attention=True,
        sliding_window_size=2,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    ```
    """

    presets = GEMMA3_PRESETS

    @staticmethod
    def _layout_rules(config):
        # The q/k norm scales are rank 1 and need no rule.
        return gemma_layout_rules()

    def __init__(
        self,
        vocabulary_size,
        image_size: int | None,
        num_layers,
        num_query_heads,
        num_key_value_heads,
        hidden_dim,
        intermediate_dim,
        head_dim,
        query_head_dim_normalize=True,
        use_query_key_norm=True,
        use_post_ffw_norm=False,
        use_post_attention_norm=False,
        attention_logit_soft_cap=None,
        final_logit_soft_cap=None,
        use_sliding_window_attention=False,
        sliding_window_size=1024,
        local_rope_scaling_factor=1.0,
        global_rope_scaling_factor=1.0,
        vision_encoder=None,
        layer_norm_epsilon=1e-6,
        use_bidirectional_attention=False,
        dropout=0,
        is_embedding_model=False,
        pooling_intermediate_dim=None,
        embedding_dim=None,
        dtype=None,
        **kwargs,
    ):
        if vision_encoder is not None:
            raise ValueError(
                "Gemma3Backbone is text only: `vision_encoder` must be None. "
                f"Received: vision_encoder={vision_encoder!r}."
            )
        if (
            is_embedding_model
            or pooling_intermediate_dim is not None
            or embedding_dim is not None
        ):
            raise ValueError(
                "Gemma3Backbone does not support the embedding model (pooling "
                "head): pass is_embedding_model=False, "
                "pooling_intermediate_dim=None and embedding_dim=None. "
                f"Received: is_embedding_model={is_embedding_model!r}, "
                f"pooling_intermediate_dim={pooling_intermediate_dim!r}, "
                f"embedding_dim={embedding_dim!r}."
            )

        def attention_options(index):
            local = is_local_layer(index, use_sliding_window_attention)
            return dict(
                sliding_window_size=sliding_window_size if local else None,
                rope_wavelength=(
                    LOCAL_ROPE_WAVELENGTH if local else GLOBAL_ROPE_WAVELENGTH
                ),
                rope_scaling_factor=(
                    local_rope_scaling_factor
                    if local
                    else global_rope_scaling_factor
                ),
                use_query_key_norm=use_query_key_norm,
            )

        build_gemma_stack(
            self,
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            num_query_heads=num_query_heads,
            num_key_value_heads=num_key_value_heads,
            hidden_dim=hidden_dim,
            # Unlike Gemma's, `intermediate_dim` is one branch's width.
            ffw_dim=intermediate_dim,
            head_dim=head_dim,
            query_head_dim_normalize=query_head_dim_normalize,
            use_post_ffw_norm=use_post_ffw_norm,
            use_post_attention_norm=use_post_attention_norm,
            attention_logit_soft_cap=attention_logit_soft_cap,
            final_logit_soft_cap=final_logit_soft_cap,
            layer_norm_epsilon=layer_norm_epsilon,
            dropout=dropout,
            attention_options=attention_options,
            use_bidirectional_attention=use_bidirectional_attention,
            dtype=dtype,
            **kwargs,
        )
