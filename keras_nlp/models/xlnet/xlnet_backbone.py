"""XLNet encoder backbone."""

import keras
from keras import ops

from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import MODEL
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.construction import check_dropout_rate
from keras_nlp.models.construction import check_heads_divide
from keras_nlp.models.functional import init_functional
from keras_nlp.models.xlnet.xlnet_layers import HEAD_BIAS_DIMS
from keras_nlp.models.xlnet.xlnet_layers import KERNEL_DIMS
from keras_nlp.models.xlnet.xlnet_layers import MASK_EMBEDDING_DIMS
from keras_nlp.models.xlnet.xlnet_layers import SEGMENT_ENCODING_DIMS
from keras_nlp.models.xlnet.xlnet_layers import XLNetAttentionMask
from keras_nlp.models.xlnet.xlnet_layers import XLNetEmbedding
from keras_nlp.models.xlnet.xlnet_layers import XLNetEncoderBlock
from keras_nlp.models.xlnet.xlnet_presets import XLNET_PRESETS

BLOCK = r"xlnet_encoder_\d+/"
# Heads on the model axis, hidden on the data axis; where the model axis
# does not divide the heads, hidden on both (a head is never split).
_KERNEL_ROLES = ({"heads": MODEL, "hidden": DATA}, {"hidden": (DATA, MODEL)})


class XLNetBackbone(Backbone):
    """XLNet encoder: token, segment ids and a padding mask to contextual
    embeddings.

    Word embeddings (no absolute positions), then `num_layers` post-norm
    blocks of Transformer-XL relative self-attention, whose logits add a
    per-head "same segment or not" term, and a feed-forward. As in
    keras-hub, only the content stream runs; the query stream's
    `mask_emb` is a weight of the checkpoints that inference leaves
    unused. Each query attends to the real keys and to itself.

    Every row is computed on its own. keras-hub 0.32.0 lays out its
    relative encoding and padding mask with a reshape where a transpose
    is meant, so its outputs for a batch of more than one row mix rows;
    with one row they equal these.

    Args:
        vocabulary_size: int. Rows of the word embedding.
        num_layers: int. Number of encoder blocks.
        num_heads: int. Attention heads; must divide `hidden_dim`.
        hidden_dim: int. Width of the embeddings and the residual stream.
        intermediate_dim: int. Width of each feed-forward's hidden layer.
        dropout: float. Dropout rate in training: on the embeddings, the
            relative encoding, both residual branches, the feed-forward's
            hidden layer and the output. Defaults to `0.0`.
        activation: str. The feed-forward activation. Defaults to
            `"gelu"` (exact).
        kernel_initializer_range: float. Standard deviation of the
            truncated-normal kernels, segment encodings and `mask_emb`.
            Defaults to `0.02`.
        bias_initializer: initializer of the per-head attention biases.
            Defaults to `"zeros"`.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Returns (when called):
        `(batch, seq, hidden_dim)`, the last block's content stream.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models import XLNetBackbone

    model = XLNetBackbone(
        vocabulary_size=100,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
    )
    outputs = model(
        {
            "token_ids": np.array([[7, 9, 4, 3, 0]], "int32"),
            "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
            "segment_ids": np.array([[0, 0, 1, 1, 1]], "int32"),
        }
    )
    outputs.shape  # (1, 5, 32)
    ```
    """

    presets = XLNET_PRESETS

    @staticmethod
    def _layout_rules(config):
        attention = BLOCK + "rel_attn/"
        return [
            *token_embedding_rules(
                "content_query_embedding/word_embedding/", tied=True
            ),
            named_rule(
                "encoder_block_attn_mask_layer/mask_emb",
                MASK_EMBEDDING_DIMS,
                {},
            ),
            named_rule(
                attention + "(query|key|value|encoding)/kernel",
                KERNEL_DIMS,
                *_KERNEL_ROLES,
            ),
            # `(hidden, heads, head_dim)` too: by the declared names, heads
            # still land on the model axis and hidden on the data axis.
            named_rule(
                attention + "attention_output/kernel",
                KERNEL_DIMS,
                *_KERNEL_ROLES,
            ),
            named_rule(
                BLOCK + "(content|positional|segment)_attention_bias",
                HEAD_BIAS_DIMS,
                {"heads": MODEL},
            ),
            named_rule(
                BLOCK + "segment_encoding",
                SEGMENT_ENCODING_DIMS,
                {"heads": MODEL},
            ),
            *feedforward_rules(BLOCK, gated=False),
        ]

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.0,
        activation="gelu",
        kernel_initializer_range=0.02,
        bias_initializer="zeros",
        dtype=None,
        **kwargs,
    ):
        check_heads_divide(hidden_dim, num_heads)
        check_dropout_rate(dropout)
        initializer = keras.initializers.TruncatedNormal(
            stddev=kernel_initializer_range
        )
        self.content_query_embedding = XLNetEmbedding(
            vocabulary_size,
            hidden_dim,
            dropout=dropout,
            dtype=dtype,
            name="content_query_embedding",
        )
        self.token_embedding = self.content_query_embedding.word_embedding
        self.attn_mask_layer = XLNetAttentionMask(
            hidden_dim,
            initializer=initializer,
            dtype=dtype,
            name="encoder_block_attn_mask_layer",
        )
        self.transformer_layers = [
            XLNetEncoderBlock(
                num_heads,
                hidden_dim,
                intermediate_dim,
                dropout=dropout,
                activation=activation,
                kernel_initializer=initializer,
                bias_initializer=bias_initializer,
                dtype=dtype,
                name=f"xlnet_encoder_{index}",
            )
            for index in range(num_layers)
        ]
        self.output_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="dropout"
        )

        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in ("token_ids", "padding_mask", "segment_ids")
        }
        x, encoding = self.content_query_embedding(inputs["token_ids"])
        attention_mask = self.attn_mask_layer(inputs["padding_mask"])
        segment_ids = inputs["segment_ids"]
        different_segments = ops.not_equal(
            segment_ids[:, :, None], segment_ids[:, None, :]
        )
        for block in self.transformer_layers:
            x = block(x, encoding, attention_mask, different_segments)
        init_functional(
            self,
            inputs=inputs,
            outputs=self.output_dropout(x),
            dtype=dtype,
            **kwargs,
        )
