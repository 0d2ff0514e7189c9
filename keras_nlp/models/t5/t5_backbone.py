"""T5 encoder-decoder backbone."""

import keras

from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import MODEL
from keras_nlp.layers.cached_attention import decoder_attention_mask
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.layers.token_and_position_embedding import token_embedding
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.construction import check_dropout_rate
from keras_nlp.models.functional import init_functional
from keras_nlp.models.t5.t5_layers import OUTPUT_PROJECTION_DIMS
from keras_nlp.models.t5.t5_layers import PROJECTION_DIMS
from keras_nlp.models.t5.t5_layers import RELATIVE_BIAS_DIMS
from keras_nlp.models.t5.t5_layers import T5Block
from keras_nlp.models.t5.t5_layers import T5LayerNorm
from keras_nlp.models.t5.t5_presets import T5_PRESETS

BLOCK = r"transformer_(encoder|decoder)_layer_\d+/"
ATTENTION = BLOCK + "(self_attention|cross_attention)/"
FEEDFORWARD_NAMES = {
    "intermediate": "input_projector",
    "gate": "gate_projector",
    "output": "output_projector",
}
# Flat attention kernels: whole heads on the model axis, or their hidden
# dimension over both axes.
_HEADS_ON_MODEL = {"heads": MODEL, "hidden": DATA}
_HIDDEN_ON_BOTH = {"hidden": (DATA, MODEL)}


def flat_heads_stay_whole(num_heads, key_value_dim):
    """Whether every model axis of at most `num_heads` devices that divides
    the flat `num_heads * key_value_dim` dimension also divides the heads.

    The resolver sees only the flat size: 12 heads of 64 (768) divide by 8,
    which would put 1.5 heads on each of 8 devices. Powers of two pass;
    6 and 12 heads don't (4 and 8 divide 384 and 768).
    """
    flat = num_heads * key_value_dim
    return all(
        num_heads % size == 0
        for size in range(2, num_heads + 1)
        if flat % size == 0
    )


def _norm_names(num_layers):
    """keras-hub's auto-generated norm names, as a fresh process numbers
    them: two per encoder layer, then three per decoder layer."""

    def name(index):
        return "t5_layer_norm" + (f"_{index}" if index else "")

    encoder = [[name(2 * i), name(2 * i + 1)] for i in range(num_layers)]
    start = 2 * num_layers
    decoder = [
        [name(start + 3 * i + k) for k in range(3)] for i in range(num_layers)
    ]
    return encoder, decoder


class T5Backbone(Backbone):
    """T5: a bidirectional encoder and a causal decoder that reads it.

    One token embedding shared by both stacks, no position embedding:
    each stack's first layer owns a learned bias per head and bucket of
    relative distance, which every layer of that stack adds to its
    (unscaled) attention scores. Layers are pre-norm with T5's scale-only
    RMS norm; decoder layers add a cross-attention over the encoder's
    output. The feed-forward is ReLU (T5) or gated GELU (T5 1.1, Flan-T5).
    No projection has a bias. Each stack ends with a norm and dropout.

    Args:
        vocabulary_size: int. Rows of the token embedding.
        num_layers: int. Layers of the encoder, and of the decoder.
        num_heads: int. Attention heads.
        hidden_dim: int. Width of the embeddings and residual streams.
        intermediate_dim: int. Width of each feed-forward's hidden layer.
        key_value_dim: int. Width of each head. Defaults to
            `hidden_dim // num_heads`.
        dropout: float. Dropout rate in training. Defaults to `0.1`.
        activation: str. Feed-forward activation. Defaults to `"relu"`.
        use_gated_activation: bool. Multiply the activation by a linear
            gate (GEGLU with GELU). Defaults to `True`.
        layer_norm_epsilon: float. Epsilon of every norm. Defaults to
            `1e-6`.
        tie_embedding_weights: bool. `False` adds the output projection
            `token_embedding/reverse_embeddings` (Flan-T5). Defaults to
            `True`.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Returns (when called):
        `{"encoder_sequence_output": (batch, source_len, hidden_dim),
        "decoder_sequence_output": (batch, target_len, hidden_dim)}`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models import T5Backbone

    model = T5Backbone(
        vocabulary_size=100,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        activation="gelu",
        tie_embedding_weights=False,
    )
    outputs = model(
        {
            "encoder_token_ids": np.array([[5, 7, 9, 1, 0]], "int32"),
            "encoder_padding_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
            "decoder_token_ids": np.array([[0, 7, 9]], "int32"),
            "decoder_padding_mask": np.array([[1, 1, 1]], "int32"),
        }
    )
    outputs["encoder_sequence_output"].shape  # (1, 5, 32)
    outputs["decoder_sequence_output"].shape  # (1, 3, 32)
    ```
    """

    # Sequence and context parallelism split one length, `token_ids`: here
    # encoder and decoder sequences differ in length.
    sequence_splittable = False

    presets = T5_PRESETS
    lora_target_names = ("query_projector", "value_projector")

    @staticmethod
    def _layout_rules(config):
        # 32128 = 128 * 251: the vocabulary takes the model axis. The
        # relative bias tables (32, heads) are tiny: replicated. keras-hub
        # gives the encoder's and the decoder's one path; one rule covers
        # both. Attention kernels are flat (hidden, heads * key_value_dim):
        # heads go on the model axis only where no axis that divides the
        # flat size splits a head (8, 16, 32, 64 heads); otherwise (6, 12)
        # hidden takes both axes, which shards as much, at the cost of an
        # all-reduce of the projections.
        num_heads = config["num_heads"]
        key_value_dim = config.get("key_value_dim") or (
            config["hidden_dim"] // num_heads
        )
        kernels = [_HIDDEN_ON_BOTH]
        if flat_heads_stay_whole(num_heads, key_value_dim):
            kernels = [_HEADS_ON_MODEL, _HIDDEN_ON_BOTH]
        return [
            *token_embedding_rules(
                "token_embedding/",
                tied=config.get("tie_embedding_weights", True),
            ),
            named_rule("self_attention/embeddings", RELATIVE_BIAS_DIMS, {}),
            named_rule(
                ATTENTION + "(query|key|value)_projector/kernel",
                PROJECTION_DIMS,
                *kernels,
            ),
            named_rule(
                ATTENTION + "output_projector/kernel",
                OUTPUT_PROJECTION_DIMS,
                *kernels,
            ),
            *feedforward_rules(
                BLOCK,
                sublayer_names=FEEDFORWARD_NAMES,
                gated=config.get("use_gated_activation", True),
            ),
        ]

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        key_value_dim=None,
        dropout=0.1,
        activation="relu",
        use_gated_activation=True,
        layer_norm_epsilon=1e-06,
        tie_embedding_weights=True,
        dtype=None,
        **kwargs,
    ):
        check_dropout_rate(dropout)
        self.token_embedding = token_embedding(
            vocabulary_size,
            hidden_dim,
            tie_weights=tie_embedding_weights,
            initializer=keras.initializers.TruncatedNormal(stddev=1.0),
            dtype=dtype,
        )
        encoder_norms, decoder_norms = _norm_names(num_layers)

        def stack(side, norm_names):
            return [
                T5Block(
                    num_heads=num_heads,
                    key_value_dim=key_value_dim or hidden_dim // num_heads,
                    hidden_dim=hidden_dim,
                    intermediate_dim=intermediate_dim,
                    is_decoder=side == "decoder",
                    activation=activation,
                    use_gated_activation=use_gated_activation,
                    layer_norm_epsilon=layer_norm_epsilon,
                    dropout=dropout,
                    use_relative_attention_bias=index == 0,
                    norm_names=norm_names[index],
                    dtype=dtype,
                    name=f"transformer_{side}_layer_{index}",
                )
                for index in range(num_layers)
            ]

        def dropout_layer(name):
            return keras.layers.Dropout(dropout, dtype=dtype, name=name)

        def output_norm(side):
            return T5LayerNorm(
                layer_norm_epsilon,
                dtype=dtype,
                name=f"{side}_output_layer_norm",
            )

        # keras-hub's attribute names and order: they order the weights.
        self.encoder_embedding_dropout = dropout_layer(
            "encoder_embedding_dropout"
        )
        self.encoder_transformer_layers = stack("encoder", encoder_norms)
        self.encoder_layer_norm = output_norm("encoder")
        self.encoder_dropout = dropout_layer("encoder_output_dropout")
        self.decoder_embedding_dropout = dropout_layer(
            "decoder_embedding_dropout"
        )
        self.decoder_transformer_layers = stack("decoder", decoder_norms)
        self.decoder_layer_norm = output_norm("decoder")
        self.decoder_dropout = dropout_layer("decoder_output_dropout")

        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in (
                "encoder_token_ids",
                "encoder_padding_mask",
                "decoder_token_ids",
                "decoder_padding_mask",
            )
        }
        # Every query sees every real key of the source.
        encoder_mask = inputs["encoder_padding_mask"][:, None, :]
        x = self.encoder_embedding_dropout(
            self.token_embedding(inputs["encoder_token_ids"])
        )
        position_bias = None
        for block in self.encoder_transformer_layers:
            x, position_bias = block(
                x, attention_mask=encoder_mask, position_bias=position_bias
            )
        encoder_output = self.encoder_dropout(self.encoder_layer_norm(x))

        x = self.decoder_embedding_dropout(
            self.token_embedding(inputs["decoder_token_ids"])
        )
        # The decoder's first layer adds the causal mask.
        decoder_mask = inputs["decoder_padding_mask"][:, None, :]
        position_bias = None
        for block in self.decoder_transformer_layers:
            x, position_bias = block(
                x,
                attention_mask=decoder_mask,
                position_bias=position_bias,
                encoder_output=encoder_output,
                encoder_mask=encoder_mask,
            )
        decoder_output = self.decoder_dropout(self.decoder_layer_norm(x))
        init_functional(
            self,
            inputs=inputs,
            outputs={
                "encoder_sequence_output": encoder_output,
                "decoder_sequence_output": decoder_output,
            },
            dtype=dtype,
            **kwargs,
        )

    # === Cached decoding (`T5Seq2SeqLM.generate`) ===

    def encode(self, token_ids, padding_mask):
        """The encoder's output `(batch, source_len, hidden_dim)`."""
        x = self.encoder_embedding_dropout(self.token_embedding(token_ids))
        mask = padding_mask[:, None, :]
        position_bias = None
        for block in self.encoder_transformer_layers:
            x, position_bias = block(
                x, attention_mask=mask, position_bias=position_bias
            )
        return self.encoder_dropout(self.encoder_layer_norm(x))

    def decode_with_cache(
        self,
        token_ids,
        self_attention_caches,
        cross_attention_caches,
        cache_update_index,
        encoder_padding_mask,
        pin=None,
    ):
        """Runs decoder tokens through the layers with key/value caches.

        Arguments and return value as `BartBackbone.decode_with_cache`:
        the first layer's relative position bias counts the queries from
        `cache_update_index`.
        """
        x = self.decoder_embedding_dropout(self.token_embedding(token_ids))
        shape = keras.ops.shape(token_ids)
        mask = decoder_attention_mask(
            shape[0],
            shape[1],
            keras.ops.shape(self_attention_caches[0])[2],
            start_index=cache_update_index,
        )
        encoder_mask = encoder_padding_mask[:, None, :]
        position_bias = None
        updated = []
        for number, (block, cache, cross) in enumerate(
            zip(
                self.decoder_transformer_layers,
                self_attention_caches,
                cross_attention_caches,
                strict=True,
            )
        ):
            x, position_bias, cache = block(
                x,
                attention_mask=mask,
                position_bias=position_bias,
                encoder_mask=encoder_mask,
                self_attention_cache=cache,
                cache_update_index=cache_update_index,
                cross_attention_cache=cross,
            )
            if pin is not None:
                x, cache = pin(number, x, cache)
            updated.append(cache)
        return self.decoder_dropout(self.decoder_layer_norm(x)), updated
