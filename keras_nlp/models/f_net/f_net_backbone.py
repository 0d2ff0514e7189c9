"""F-Net encoder backbone."""

import keras

from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.f_net.f_net_fourier_mixing import FNetFourierMixing
from keras_nlp.models.f_net.f_net_presets import F_NET_PRESETS
from keras_nlp.models.families.bert import bert_style_rules
from keras_nlp.models.families.bert import build_bert_style_from
from keras_nlp.models.families.bert import encoder_block

# keras-hub's `FNetEncoder` names, which are the checkpoints' paths.
SUBLAYER_NAMES = {
    "attention_norm": "mixing_layer_norm",
    "feedforward_norm": "output_layer_norm",
    "intermediate": "intermediate_dense",
    "output": "output_dense",
}


class FNetBackbone(Backbone):
    """F-Net encoder: token ids and segment ids to contextual embeddings.

    BERT with the attention replaced by a Fourier transform. Token,
    learned position and segment embeddings summed, LayerNorm-ed and
    projected by a dense layer, then `num_layers` post-norm blocks that
    mix tokens with the real part of a 2-D DFT over the sequence and
    hidden dimensions (no weights, no mask: every token, padding
    included, mixes with every other) followed by a tanh-GELU
    feed-forward. A tanh dense layer on the first token gives the pooled
    output. Kernels and biases initialize from `RandomNormal(0.02)`.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Number of F-Net blocks.
        hidden_dim: int. Width of the embeddings and the residual stream.
        intermediate_dim: int. Width of each feed-forward's hidden layer.
        dropout: float. Dropout rate in training: on the projected
            embeddings and the feed-forward branches (not on the Fourier
            transform's output). Defaults to `0.1`.
        max_sequence_length: int. Rows of the position embedding, the
            longest input the model takes. Defaults to `512`.
        num_segments: int. Rows of the segment embedding. Defaults to `4`.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype;
            the Fourier transform always runs in float32.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Returns (when called):
        `{"sequence_output": (batch, seq, hidden_dim), "pooled_output":
        (batch, hidden_dim)}`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models import FNetBackbone

    model = FNetBackbone(
        vocabulary_size=100,
        num_layers=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=16,
    )
    outputs = model(
        {
            "token_ids": np.array([[2, 7, 9, 3, 0]], "int32"),
            "segment_ids": np.array([[0, 0, 1, 1, 0]], "int32"),
        }
    )
    outputs["sequence_output"].shape  # (1, 5, 32)
    outputs["pooled_output"].shape  # (1, 32)
    ```
    """

    presets = F_NET_PRESETS
    # No attention: the feed-forward's two dense layers hold nearly all of
    # a block's weights, and are the only projections a block has.
    lora_target_names = ("intermediate_dense", "output_dense")

    @staticmethod
    def _layout_rules(config):
        # BERT's tables, projection and pooler; the blocks have only a
        # feed-forward to shard (the Fourier transform has no weights).
        return bert_style_rules(
            projection="embedding_projection",
            blocks=feedforward_rules(
                r"f_net_layer_\d+/", sublayer_names=SUBLAYER_NAMES, gated=False
            ),
        )

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        max_sequence_length=512,
        num_segments=4,
        dtype=None,
        **kwargs,
    ):
        initializer = keras.initializers.RandomNormal(stddev=0.02)
        blocks = [
            encoder_block(
                f"f_net_layer_{index}",
                num_heads=None,
                hidden_dim=hidden_dim,
                intermediate_dim=intermediate_dim,
                activation="gelu_approximate",
                dropout=dropout,
                layer_norm_epsilon=1e-12,
                initializer=initializer,
                dtype=dtype,
                mixing=FNetFourierMixing(dtype=dtype, name="fourier_mixing"),
                sublayer_names=SUBLAYER_NAMES,
                bias_initializer=initializer,
                mixing_output_dropout=False,
            )
            for index in range(num_layers)
        ]
        build_bert_style_from(
            self,
            locals(),
            num_heads=None,
            activation="gelu_approximate",
            initializer=initializer,
            bias_initializer=initializer,
            projection_name="embedding_projection",
            project_before_dropout=True,
            padding_mask=False,
            blocks=blocks,
        )
