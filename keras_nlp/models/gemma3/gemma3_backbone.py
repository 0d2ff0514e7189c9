"""Gemma 3 decoder backbone (text only)."""

import keras
from keras import ops

from keras_nlp.distribution import DATA
from keras_nlp.distribution import MODEL
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.decoder import init_decoder_graph
from keras_nlp.models.gemma3.gemma3_decoder_block import Gemma3DecoderBlock
from keras_nlp.models.gemma3.gemma3_presets import GEMMA3_PRESETS

# With sliding windows on, every sixth block (indices 5, 11, ...) attends
# globally and the other five locally.
GLOBAL_LAYER_PERIOD = 6
LOCAL_ROPE_WAVELENGTH = 10_000.0
GLOBAL_ROPE_WAVELENGTH = 1_000_000.0
# Gemma's names for the gated feed-forward kernels.
_FEEDFORWARD_NAMES = {
    "intermediate": "ffw_gating",
    "gate": "ffw_gating_2",
    "output": "ffw_linear",
}


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
        # Gemma's attention kernels are (heads, hidden, head_dim), not the
        # shared layer's (hidden, heads, head_dim): heads on the model axis,
        # hidden on the data axis, head_dim never sharded. The q/k norm
        # scales are rank 1 and need no rule.
        block = r"decoder_block_\d+/"
        return [
            *token_embedding_rules("token_embedding/", tied=True),
            (
                block + "attention/query/kernel",
                (MODEL, DATA, None),
                ("heads", "hidden", "head_dim"),
            ),
            (
                block + "attention/(key|value)/kernel",
                (MODEL, DATA, None),
                ("kv_heads", "hidden", "head_dim"),
            ),
            (
                block + "attention/attention_output/kernel",
                (MODEL, None, DATA),
                ("heads", "head_dim", "hidden"),
            ),
            *feedforward_rules(block, sublayer_names=_FEEDFORWARD_NAMES),
        ]

    def __init__(
        self,
        vocabulary_size,
        image_size,
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

        # === Layers ===
        self.token_embedding = keras.layers.ReversibleEmbedding(
            vocabulary_size,
            hidden_dim,
            tie_weights=True,
            embeddings_initializer=keras.initializers.VarianceScaling(
                scale=1.0, mode="fan_in", distribution="untruncated_normal"
            ),
            logit_soft_cap=final_logit_soft_cap,
            dtype=dtype,
            name="token_embedding",
        )
        self.transformer_layers = []
        for index in range(num_layers):
            local = is_local_layer(index, use_sliding_window_attention)
            self.transformer_layers.append(
                Gemma3DecoderBlock(
                    hidden_dim=hidden_dim,
                    intermediate_dim=intermediate_dim,
                    head_dim=head_dim,
                    num_query_heads=num_query_heads,
                    num_key_value_heads=num_key_value_heads,
                    query_head_dim_normalize=query_head_dim_normalize,
                    use_query_key_norm=use_query_key_norm,
                    use_post_ffw_norm=use_post_ffw_norm,
                    use_post_attention_norm=use_post_attention_norm,
                    logit_soft_cap=attention_logit_soft_cap,
                    use_sliding_window_attention=local,
                    sliding_window_size=sliding_window_size,
                    layer_norm_epsilon=layer_norm_epsilon,
                    rope_wavelength=(
                        LOCAL_ROPE_WAVELENGTH
                        if local
                        else GLOBAL_ROPE_WAVELENGTH
                    ),
                    rope_scaling_factor=(
                        local_rope_scaling_factor
                        if local
                        else global_rope_scaling_factor
                    ),
                    use_bidirectional_attention=use_bidirectional_attention,
                    dropout=dropout,
                    dtype=dtype,
                    name=f"decoder_block_{index}",
                )
            )
        self.layer_norm = ZeroCenteredRMSNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="final_normalization"
        )

        # === Functional graph ===
        def embed(token_ids):
            x = self.token_embedding(token_ids)
            return x * ops.cast(ops.sqrt(float(hidden_dim)), x.dtype)

        init_decoder_graph(
            self,
            embed=embed,
            blocks=self.transformer_layers,
            final_norm=self.layer_norm,
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.image_size = image_size
        self.num_layers = num_layers
        self.num_query_heads = num_query_heads
        self.num_key_value_heads = num_key_value_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.head_dim = head_dim
        self.query_head_dim_normalize = query_head_dim_normalize
        self.use_query_key_norm = use_query_key_norm
        self.use_post_ffw_norm = use_post_ffw_norm
        self.use_post_attention_norm = use_post_attention_norm
        self.attention_logit_soft_cap = attention_logit_soft_cap
        self.final_logit_soft_cap = final_logit_soft_cap
        self.use_sliding_window_attention = use_sliding_window_attention
        self.sliding_window_size = sliding_window_size
        self.local_rope_scaling_factor = local_rope_scaling_factor
        self.global_rope_scaling_factor = global_rope_scaling_factor
        self.vision_encoder = None
        self.layer_norm_epsilon = layer_norm_epsilon
        self.use_bidirectional_attention = use_bidirectional_attention
        self.dropout = dropout
        self.is_embedding_model = False
        self.pooling_intermediate_dim = None
        self.embedding_dim = None

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "image_size": self.image_size,
                "num_layers": self.num_layers,
                "num_query_heads": self.num_query_heads,
                "num_key_value_heads": self.num_key_value_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "head_dim": self.head_dim,
                "query_head_dim_normalize": self.query_head_dim_normalize,
                "use_query_key_norm": self.use_query_key_norm,
                "use_post_ffw_norm": self.use_post_ffw_norm,
                "use_post_attention_norm": self.use_post_attention_norm,
                "attention_logit_soft_cap": self.attention_logit_soft_cap,
                "final_logit_soft_cap": self.final_logit_soft_cap,
                "use_sliding_window_attention": (
                    self.use_sliding_window_attention
                ),
                "sliding_window_size": self.sliding_window_size,
                "local_rope_scaling_factor": self.local_rope_scaling_factor,
                "global_rope_scaling_factor": self.global_rope_scaling_factor,
                "vision_encoder": self.vision_encoder,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "use_bidirectional_attention": (
                    self.use_bidirectional_attention
                ),
                "dropout": self.dropout,
                # Kept so that keras-hub's `from_config` reads our configs.
                "is_embedding_model": self.is_embedding_model,
                "pooling_intermediate_dim": self.pooling_intermediate_dim,
                "embedding_dim": self.embedding_dim,
            }
        )
        return config
