"""T5Gemma encoder-decoder backbone (Gemma 2 style blocks)."""

import keras
from keras import ops

from keras_nlp.layers.common import check_rates
from keras_nlp.layers.dense import fresh_initializer
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.layers.token_and_position_embedding import token_embedding
from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.families.seq2seq import decode_blocks_with_cache
from keras_nlp.models.families.seq2seq import init_seq2seq_graph
from keras_nlp.models.t5gemma.t5gemma_layers import FEEDFORWARD_NAMES
from keras_nlp.models.t5gemma.t5gemma_layers import T5GemmaDecoderBlock
from keras_nlp.models.t5gemma.t5gemma_layers import T5GemmaEncoderBlock
from keras_nlp.models.t5gemma.t5gemma_layers import check_layer_types
from keras_nlp.models.t5gemma.t5gemma_layers import t5gemma_attention
from keras_nlp.models.t5gemma.t5gemma_presets import T5GEMMA_PRESETS

BLOCK = r"(encoder|decoder)_layer_\d+/"
# The encoder's and the decoder's final norms: keras-hub leaves them
# unnamed, so a fresh session numbers them so; its presets load into these
# (the loader pairs auto-numbered names in order).
FINAL_NORM_NAMES = ("rms_normalization", "rms_normalization_1")


def t5gemma_layout_rules(config, attention_names):
    """Layout rules of a T5Gemma-style backbone.

    Both token tables (and an untied output projection) with the
    vocabulary on the model axis; every attention's heads on the model
    axis, its kernels' hidden dimension over both axes where the heads do
    not divide (a head is never split); the feed-forward width on the
    model axis. The norm scales are rank 1 and replicated.

    Args:
        config: the backbone's config.
        attention_names: the attentions' path segments, a regex
            alternative (`self_attention|cross_attention`).
    """
    return [
        *token_embedding_rules("encoder_token_embedding/", tied=True),
        *token_embedding_rules(
            "decoder_token_embedding/",
            tied=config.get("tie_word_embeddings", True),
        ),
        *attention_rules(
            BLOCK + f"({attention_names})/",
            use_bias=config.get("attention_bias", False),
            hidden_if_heads_indivisible=True,
        ),
        *feedforward_rules(BLOCK + "mlp/", sublayer_names=FEEDFORWARD_NAMES),
    ]


def scaled_embed(embedding, token_ids, hidden_dim):
    """Gemma's embedding: the table's rows times `sqrt(hidden_dim)`."""
    x = embedding(token_ids)
    return x * ops.cast(ops.sqrt(float(hidden_dim)), x.dtype)


def build_encoder_decoder(
    backbone,
    *,
    vocabulary_size,
    encoder_hidden_dim,
    decoder_hidden_dim,
    encoder_blocks,
    decoder_blocks,
    rms_norm_eps,
    dropout_rate,
    tie_word_embeddings,
    kernel_initializer,
    dtype=None,
    **kwargs,
):
    """Embeddings, blocks and final norms into `backbone`, and its graph.

    The encoder's table `encoder_token_embedding` and the decoder's
    `decoder_token_embedding` (whose reverse gives the logits), each
    scaled by the square root of its width; the blocks; the final norms
    (see `FINAL_NORM_NAMES`). Sets `token_embedding` (the encoder's, as
    keras-hub), `decoder_token_embedding`, `encoder_transformer_layers`,
    `decoder_transformer_layers`, `encoder_norm` and `decoder_norm`.
    """
    backbone.token_embedding = token_embedding(
        vocabulary_size,
        encoder_hidden_dim,
        initializer=fresh_initializer(kernel_initializer),
        dtype=dtype,
        name="encoder_token_embedding",
    )
    backbone.decoder_token_embedding = token_embedding(
        vocabulary_size,
        decoder_hidden_dim,
        tie_weights=tie_word_embeddings,
        initializer=fresh_initializer(kernel_initializer),
        dtype=dtype,
        name="decoder_token_embedding",
    )
    backbone.encoder_transformer_layers = encoder_blocks
    backbone.decoder_transformer_layers = decoder_blocks
    backbone.encoder_norm = ZeroCenteredRMSNormalization(
        epsilon=rms_norm_eps, dtype=dtype, name=FINAL_NORM_NAMES[0]
    )
    backbone.decoder_norm = ZeroCenteredRMSNormalization(
        epsilon=rms_norm_eps, dtype=dtype, name=FINAL_NORM_NAMES[1]
    )
    backbone.embedding_dropout = keras.layers.Dropout(
        dropout_rate, dtype=dtype, name="embedding_dropout"
    )
    inputs = {
        name: keras.Input(shape=(None,), dtype="int32", name=name)
        for name in (
            "encoder_token_ids",
            "encoder_padding_mask",
            "decoder_token_ids",
            "decoder_padding_mask",
        )
    }
    encoder_output = encode_tokens(
        backbone, inputs["encoder_token_ids"], inputs["encoder_padding_mask"]
    )
    init_seq2seq_graph(
        backbone,
        inputs,
        encoder_output=encoder_output,
        decoder_input=backbone.embedding_dropout(
            scaled_embed(
                backbone.decoder_token_embedding,
                inputs["decoder_token_ids"],
                decoder_hidden_dim,
            )
        ),
        final_norm=backbone.decoder_norm,
        dtype=dtype,
        **kwargs,
    )


def encode_tokens(backbone, token_ids, padding_mask):
    """The encoder's output `(batch, source_len, encoder_hidden_dim)`."""
    x = backbone.embedding_dropout(
        scaled_embed(
            backbone.token_embedding,
            token_ids,
            backbone.token_embedding.output_dim,
        )
    )
    for block in backbone.encoder_transformer_layers:
        x = block(x, padding_mask=padding_mask)
    return backbone.encoder_norm(x)


class T5GemmaEncoderDecoderMixin:
    """Cached decoding (`T5GemmaSeq2SeqLM.generate`): `encode` and
    `decode_with_cache`, as `BartBackbone`'s."""

    # Sequence and context parallelism split one length, `token_ids`: here
    # encoder and decoder sequences differ in length.
    sequence_splittable = False

    def encode(self, token_ids, padding_mask):
        """The encoder's output `(batch, source_len, encoder_hidden_dim)`."""
        return encode_tokens(self, token_ids, padding_mask)

    def decode_with_cache(
        self,
        token_ids,
        self_attention_caches,
        cross_attention_caches,
        cache_update_index,
        encoder_padding_mask,
        pin=None,
    ):
        """Runs decoder tokens through the blocks with key/value caches.

        Arguments and return value as `BartBackbone.decode_with_cache`;
        the hidden states are the final norm's.
        """
        x = scaled_embed(
            self.decoder_token_embedding,
            token_ids,
            self.decoder_token_embedding.output_dim,
        )
        x, updated = decode_blocks_with_cache(
            self.decoder_transformer_layers,
            x,
            self_attention_caches,
            cross_attention_caches,
            cache_update_index,
            encoder_padding_mask,
            pin,
        )
        return self.decoder_norm(x), updated


class T5GemmaBackbone(T5GemmaEncoderDecoderMixin, Backbone):
    """T5Gemma: a bidirectional encoder and a causal decoder from Gemma 2.

    Each side embeds tokens with its own table scaled by
    `sqrt(hidden_dim)`, then runs Gemma 2 blocks (zero-centered RMS norms
    before and after each branch, a GeGLU feed-forward `mlp`, grouped-query
    attention with RoPE, an optional soft cap and queries scaled by
    `query_pre_attn_scalar ** -0.5`) and a final norm. Decoder blocks add
    a cross-attention (no RoPE) over the encoder's outputs between
    self-attention and feed-forward; its keys and values are projected
    from the encoder's width (`cross_attention_hidden_size`).

    Variable paths and shapes are keras-hub's (its unnamed final norms as
    a fresh session names them, `rms_normalization` for the encoder's and
    `rms_normalization_1` for the decoder's). As in keras-hub: decoder
    `"sliding_attention"` layers let a query see the `sliding_window + 1`
    positions up to it, encoder layers attend to every real token
    whatever their type (Hugging Face's encoder windows them; the two
    agree on sources shorter than the window), and the feed-forward's
    inner dropout is the residual dropout here.

    Args:
        vocabulary_size: int. Rows of each token table.
        encoder_hidden_dim: int. Width of the encoder.
        encoder_intermediate_dim: int. Width of each encoder feed-forward
            branch.
        encoder_num_layers: int. Encoder blocks.
        encoder_num_attention_heads: int. Encoder query heads.
        encoder_num_key_value_heads: int. Encoder key/value heads.
        encoder_head_dim: int. Encoder head size.
        encoder_layer_types: list of `"sliding_attention"` or
            `"full_attention"`, one per encoder block.
        decoder_hidden_dim: int. Width of the decoder.
        decoder_intermediate_dim: int. Width of each decoder feed-forward
            branch.
        decoder_num_layers: int. Decoder blocks.
        decoder_num_attention_heads: int. Decoder query heads (self- and
            cross-attention).
        decoder_num_key_value_heads: int. Decoder key/value heads.
        decoder_head_dim: int. Decoder head size.
        decoder_layer_types: list, one type per decoder block.
        dropout_rate: float. Dropout on the embeddings and each residual
            branch. Defaults to `0.0`.
        rms_norm_eps: float. Epsilon of every norm. Defaults to `1e-6`.
        query_pre_attn_scalar: float. Queries are scaled by its inverse
            square root. Defaults to `1.0`.
        attention_bias: bool. Biases on every attention projection.
            Defaults to `False`.
        hidden_activation: str. The feed-forward gate's activation.
            Defaults to `"gelu_approximate"`.
        tie_word_embeddings: bool. The decoder's table is its output
            projection. Defaults to `True`.
        initializer_range: float. Standard deviation of the normal
            initializer of every kernel and table. Defaults to `0.02`.
        attention_dropout: float. Dropout on attention probabilities.
            Defaults to `0.0`.
        sliding_window: int or `None`. The decoder's local window (see
            above); required by sliding layers. Defaults to `None`.
        cross_attention_hidden_size: int or `None`. Width the
            cross-attention's keys and values are projected from; `None`
            means `encoder_hidden_dim`. Defaults to `None`.
        attn_logit_softcapping: float or `None`. Attention logit soft cap.
            Defaults to `None`.
        final_logit_softcapping: float or `None`. Soft cap of the logits
            (`T5GemmaSeq2SeqLM` applies it). Defaults to `None`.
        rope_max_wavelength: float. RoPE base of every self-attention.
            Defaults to `10000.0`.
        dtype: string or `keras.DTypePolicy`. Norms and softmaxes run in
            float32.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Returns (when called):
        `{"encoder_sequence_output": (batch, source_len, encoder_hidden_dim),
        "decoder_sequence_output": (batch, target_len, decoder_hidden_dim)}`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models import T5GemmaBackbone

    model = T5GemmaBackbone(
        vocabulary_size=64,
        encoder_hidden_dim=32,
        encoder_intermediate_dim=48,
        encoder_num_layers=2,
        encoder_num_attention_heads=4,
        encoder_num_key_value_heads=2,
        encoder_head_dim=8,
        encoder_layer_types=["sliding_attention", "full_attention"],
        decoder_hidden_dim=32,
        decoder_intermediate_dim=48,
        decoder_num_layers=2,
        decoder_num_attention_heads=4,
        decoder_num_key_value_heads=2,
        decoder_head_dim=8,
        decoder_layer_types=["sliding_attention", "full_attention"],
        sliding_window=4,
        query_pre_attn_scalar=8,
    )
    outputs = model(
        {
            "encoder_token_ids": np.array([[5, 7, 9, 1, 0]], "int32"),
            "encoder_padding_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
            "decoder_token_ids": np.array([[2, 4, 6]], "int32"),
            "decoder_padding_mask": np.array([[1, 1, 1]], "int32"),
        }
    )
    outputs["encoder_sequence_output"].shape  # (1, 5, 32)
    outputs["decoder_sequence_output"].shape  # (1, 3, 32)
    ```
    """

    presets = T5GEMMA_PRESETS

    @staticmethod
    def _layout_rules(config):
        return t5gemma_layout_rules(config, "self_attention|cross_attention")

    def __init__(
        self,
        vocabulary_size,
        encoder_hidden_dim,
        encoder_intermediate_dim,
        encoder_num_layers,
        encoder_num_attention_heads,
        encoder_num_key_value_heads,
        encoder_head_dim,
        encoder_layer_types,
        decoder_hidden_dim,
        decoder_intermediate_dim,
        decoder_num_layers,
        decoder_num_attention_heads,
        decoder_num_key_value_heads,
        decoder_head_dim,
        decoder_layer_types,
        dropout_rate=0.0,
        rms_norm_eps=1e-6,
        query_pre_attn_scalar=1.0,
        attention_bias=False,
        hidden_activation="gelu_approximate",
        tie_word_embeddings=True,
        initializer_range=0.02,
        attention_dropout=0.0,
        sliding_window=None,
        cross_attention_hidden_size=None,
        attn_logit_softcapping=None,
        final_logit_softcapping=None,
        rope_max_wavelength=10000.0,
        dtype=None,
        **kwargs,
    ):
        check_rates(
            dropout_rate=dropout_rate, attention_dropout=attention_dropout
        )
        check_layer_types(
            "encoder_layer_types",
            encoder_layer_types,
            encoder_num_layers,
            sliding_window,
        )
        check_layer_types(
            "decoder_layer_types",
            decoder_layer_types,
            decoder_num_layers,
            sliding_window,
        )
        initializer = keras.initializers.RandomNormal(stddev=initializer_range)
        shared = dict(
            query_pre_attn_scalar=query_pre_attn_scalar,
            use_bias=attention_bias,
            logit_soft_cap=attn_logit_softcapping,
            dropout=attention_dropout,
            layer_norm_epsilon=rms_norm_eps,
            kernel_initializer=initializer,
            dtype=dtype,
        )
        block_options = dict(
            hidden_activation=hidden_activation,
            layer_norm_epsilon=rms_norm_eps,
            dropout=dropout_rate,
            kernel_initializer=initializer,
            dtype=dtype,
        )
        encoder_heads = dict(
            num_query_heads=encoder_num_attention_heads,
            num_key_value_heads=encoder_num_key_value_heads,
            head_dim=encoder_head_dim,
        )
        decoder_heads = dict(
            num_query_heads=decoder_num_attention_heads,
            num_key_value_heads=decoder_num_key_value_heads,
            head_dim=decoder_head_dim,
        )
        encoder_blocks = [
            T5GemmaEncoderBlock(
                t5gemma_attention(
                    "self_attention",
                    rope_wavelength=rope_max_wavelength,
                    **encoder_heads,
                    **shared,
                ),
                encoder_intermediate_dim,
                name=f"encoder_layer_{i}",
                **block_options,
            )
            for i in range(encoder_num_layers)
        ]

        def decoder_window(layer_type):
            if layer_type != "sliding_attention":
                return None
            # keras-hub's decoder keeps keys up to `sliding_window` back.
            return sliding_window + 1

        decoder_blocks = [
            T5GemmaDecoderBlock(
                t5gemma_attention(
                    "self_attention",
                    rope_wavelength=rope_max_wavelength,
                    sliding_window_size=decoder_window(layer_type),
                    **decoder_heads,
                    **shared,
                ),
                t5gemma_attention(
                    "cross_attention",
                    key_value_input_dim=(
                        cross_attention_hidden_size or encoder_hidden_dim
                    ),
                    **decoder_heads,
                    **shared,
                ),
                decoder_intermediate_dim,
                name=f"decoder_layer_{i}",
                **block_options,
            )
            for i, layer_type in enumerate(decoder_layer_types)
        ]
        build_encoder_decoder(
            self,
            vocabulary_size=vocabulary_size,
            encoder_hidden_dim=encoder_hidden_dim,
            decoder_hidden_dim=decoder_hidden_dim,
            encoder_blocks=encoder_blocks,
            decoder_blocks=decoder_blocks,
            rms_norm_eps=rms_norm_eps,
            dropout_rate=dropout_rate,
            tie_word_embeddings=tie_word_embeddings,
            kernel_initializer=initializer,
            dtype=dtype,
            **kwargs,
        )
        self.final_logit_softcapping = final_logit_softcapping
