"""Gemma and Gemma 2 decoder backbone."""

import keras
from keras import ops

from keras_nlp.distribution import DATA
from keras_nlp.distribution import MODEL
from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.decoder import init_decoder_graph
from keras_nlp.models.gemma.gemma_decoder_block import GemmaDecoderBlock
from keras_nlp.models.gemma.gemma_presets import GEMMA_PRESETS


class GemmaBackbone(Backbone):
    """Gemma decoder that maps token ids to final-normalized hidden states.

    Args:
        vocabulary_size: int. Number of rows of the (tied) token embedding.
        num_layers: int. Number of decoder blocks.
        num_query_heads: int. Query heads per attention layer.
        num_key_value_heads: int. Key/value heads per attention layer; must
            divide `num_query_heads` (1 gives multi-query attention).
        hidden_dim: int. Width of the residual stream and embeddings.
        intermediate_dim: int. Twice the width of each feed-forward branch:
            the gating kernels are `(hidden_dim, intermediate_dim // 2)`.
        head_dim: int. Size of each attention head.
        query_head_dim_normalize: bool. Scale queries by `head_dim ** -0.5`
            if `True`, else by `(hidden_dim // num_query_heads) ** -0.5`.
            Defaults to `True`.
        use_post_ffw_norm: bool. Normalize each feed-forward output before
            its residual add (Gemma 2). Defaults to `False`.
        use_post_attention_norm: bool. Normalize each attention output before
            its residual add (Gemma 2). Defaults to `False`.
        attention_logit_soft_cap: float or `None`. Soft cap applied to the
            attention logits as `cap * tanh(logits / cap)`. Defaults to
            `None`.
        final_logit_soft_cap: float or `None`. Soft cap applied by the token
            embedding when it projects hidden states back to vocabulary
            logits (`reverse=True`); it does not affect this model's output.
            Defaults to `None`.
        use_sliding_window_attention: bool. If `True`, blocks with an even
            index attend only within a local window. Defaults to `False`.
        sliding_window_size: int. Width of that window. Defaults to `4096`.
        layer_norm_epsilon: float. Epsilon of every normalization. Defaults
            to `1e-6`.
        dropout: float. Dropout rate used in training. Defaults to `0`.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
            Normalizations and attention softmaxes always run in float32.
        **kwargs: Forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.gemma import GemmaBackbone

    model = GemmaBackbone(
        vocabulary_size=64,
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=1,
        hidden_dim=32,
        intermediate_dim=64,
        head_dim=8,
    )
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)
    ```
    """

    presets = GEMMA_PRESETS

    @staticmethod
    def _layout_rules(config):
        # Attention kernels are (heads, hidden, head_dim): heads go on the
        # model axis, hidden on the data axis, head_dim is never sharded.
        block = r"decoder_block_\d+/"
        return [
            # Tied (vocab, hidden); hidden on the model axis if vocab won't
            # divide.
            ("token_embedding/embeddings", [(MODEL, DATA), (DATA, MODEL)]),
            (
                block + "attention/(query|key|value)/kernel",
                (MODEL, DATA, None),
                ("heads", "hidden", "head_dim"),
            ),
            (
                block + "attention/attention_output/kernel",
                (MODEL, None, DATA),
                ("heads", "head_dim", "hidden"),
            ),
            (block + "ffw_gating(_2)?/kernel", (DATA, MODEL)),
            (block + "ffw_linear/kernel", (MODEL, DATA)),
        ]

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_query_heads,
        num_key_value_heads,
        hidden_dim,
        intermediate_dim,
        head_dim,
        query_head_dim_normalize=True,
        use_post_ffw_norm=False,
        use_post_attention_norm=False,
        attention_logit_soft_cap=None,
        final_logit_soft_cap=None,
        use_sliding_window_attention=False,
        sliding_window_size=4096,
        layer_norm_epsilon=1e-6,
        dropout=0,
        dtype=None,
        **kwargs,
    ):
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
        self.transformer_layers = [
            GemmaDecoderBlock(
                hidden_dim=hidden_dim,
                intermediate_dim=intermediate_dim,
                head_dim=head_dim,
                num_query_heads=num_query_heads,
                num_key_value_heads=num_key_value_heads,
                query_head_dim_normalize=query_head_dim_normalize,
                use_post_ffw_norm=use_post_ffw_norm,
                use_post_attention_norm=use_post_attention_norm,
                logit_soft_cap=attention_logit_soft_cap,
                # Local (windowed) and global attention alternate, local
                # first.
                use_sliding_window_attention=(
                    use_sliding_window_attention and index % 2 == 0
                ),
                sliding_window_size=sliding_window_size,
                layer_norm_epsilon=layer_norm_epsilon,
                dropout=dropout,
                dtype=dtype,
                name=f"decoder_block_{index}",
            )
            for index in range(num_layers)
        ]
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
        self.num_layers = num_layers
        self.num_query_heads = num_query_heads
        self.num_key_value_heads = num_key_value_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.head_dim = head_dim
        self.query_head_dim_normalize = query_head_dim_normalize
        self.use_post_ffw_norm = use_post_ffw_norm
        self.use_post_attention_norm = use_post_attention_norm
        self.attention_logit_soft_cap = attention_logit_soft_cap
        self.final_logit_soft_cap = final_logit_soft_cap
        self.use_sliding_window_attention = use_sliding_window_attention
        self.sliding_window_size = sliding_window_size
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = dropout

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_query_heads": self.num_query_heads,
                "num_key_value_heads": self.num_key_value_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "head_dim": self.head_dim,
                "query_head_dim_normalize": self.query_head_dim_normalize,
                "use_post_ffw_norm": self.use_post_ffw_norm,
                "use_post_attention_norm": self.use_post_attention_norm,
                "attention_logit_soft_cap": self.attention_logit_soft_cap,
                "final_logit_soft_cap": self.final_logit_soft_cap,
                "use_sliding_window_attention": (
                    self.use_sliding_window_attention
                ),
                "sliding_window_size": self.sliding_window_size,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "dropout": self.dropout,
            }
        )
        return config
