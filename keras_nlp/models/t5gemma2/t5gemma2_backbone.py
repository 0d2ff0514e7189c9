"""T5Gemma 2 encoder-decoder backbone (Gemma 3 style blocks), text only."""

import keras

from keras_nlp.layers.common import check_rates
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.t5gemma.t5gemma_backbone import T5GemmaEncoderDecoderMixin
from keras_nlp.models.t5gemma.t5gemma_backbone import build_encoder_decoder
from keras_nlp.models.t5gemma.t5gemma_backbone import t5gemma_layout_rules
from keras_nlp.models.t5gemma.t5gemma_layers import T5GemmaEncoderBlock
from keras_nlp.models.t5gemma.t5gemma_layers import check_layer_types
from keras_nlp.models.t5gemma.t5gemma_layers import t5gemma_attention
from keras_nlp.models.t5gemma2.t5gemma2_layers import MergedSelfCrossAttention
from keras_nlp.models.t5gemma2.t5gemma2_layers import T5Gemma2DecoderBlock
from keras_nlp.models.t5gemma2.t5gemma2_presets import T5GEMMA2_PRESETS

# Gemma 3's global (full attention) layers' RoPE base, whatever the config.
GLOBAL_ROPE_WAVELENGTH = 1_000_000.0


class T5Gemma2Backbone(T5GemmaEncoderDecoderMixin, Backbone):
    """T5Gemma 2 (text): a bidirectional encoder and a causal decoder from
    Gemma 3.

    As `T5GemmaBackbone`, with Gemma 3's attention: zero-centered RMS
    norms on query and key heads (`use_query_key_norm`), and per layer
    type RoPE: `"sliding_attention"` layers use `rope_max_wavelength`
    (the encoder's `encoder_rope_max_wavelength`, if given) unscaled,
    `"full_attention"` layers a base of 1,000,000 with positions divided
    by `global_rope_scaling_factor` (the encoder's
    `encoder_global_rope_scaling_factor`, if given). Encoder sliding
    layers attend within a window centered on the query (`sliding_window`
    keys: `sliding_window // 2` after it, the rest up to it); decoder
    sliding layers to the `sliding_window` positions up to the query.
    Each decoder block has one attention, `merged_attention`: its queries
    attend in one softmax over the decoder's causal keys and the
    encoder's outputs, both projected by its key and value kernels (the
    encoder's keys normalized, not rotated), so the encoder and decoder
    must be equally wide.

    Text only: keras-hub's vision tower (`vision_encoder`, a Gemma 3
    SigLIP encoder whose image tokens are interleaved into the encoder's
    input) is not built here; `vision_encoder` must be `None`, and
    `eoi_token_index` (the end-of-image token, whose embedding the vision
    model replaces) is recorded only. Variable paths and shapes are
    keras-hub's text model's (the final norms as in `T5GemmaBackbone`).

    Args:
        vocabulary_size, encoder_hidden_dim, encoder_intermediate_dim,
        encoder_num_layers, encoder_num_attention_heads,
        encoder_num_key_value_heads, encoder_head_dim,
        encoder_layer_types, decoder_hidden_dim, decoder_intermediate_dim,
        decoder_num_layers, decoder_num_attention_heads,
        decoder_num_key_value_heads, decoder_head_dim,
        decoder_layer_types, dropout_rate, rms_norm_eps,
        query_pre_attn_scalar, attention_bias, hidden_activation,
        tie_word_embeddings, initializer_range, attention_dropout,
        sliding_window, cross_attention_hidden_size,
        attn_logit_softcapping, final_logit_softcapping,
        rope_max_wavelength: as `T5GemmaBackbone`'s (but the windows,
            above); `cross_attention_hidden_size`, if given, must be
            `encoder_hidden_dim`.
        global_rope_scaling_factor: float. RoPE position scaling of full
            attention layers. Defaults to `1.0`.
        encoder_rope_max_wavelength: float or `None`. The encoder's
            sliding layers' RoPE base; `None` means `rope_max_wavelength`.
        encoder_global_rope_scaling_factor: float or `None`. The encoder's
            full layers' scaling; `None` means `global_rope_scaling_factor`.
        use_query_key_norm: bool. Norms on query and key heads. Defaults
            to `True`.
        vision_encoder: must be `None` (text only, see above).
        eoi_token_index: int. The end-of-image token id (recorded).
            Defaults to `256000`.
        dtype: string or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models import T5Gemma2Backbone

    model = T5Gemma2Backbone(
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
    outputs["decoder_sequence_output"].shape  # (1, 3, 32)
    ```
    """

    presets = T5GEMMA2_PRESETS

    @staticmethod
    def _layout_rules(config):
        return t5gemma_layout_rules(config, "self_attention|merged_attention")

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
        global_rope_scaling_factor=1.0,
        encoder_rope_max_wavelength=None,
        encoder_global_rope_scaling_factor=None,
        use_query_key_norm=True,
        vision_encoder=None,
        eoi_token_index=256000,
        dtype=None,
        **kwargs,
    ):
        if vision_encoder is not None:
            raise ValueError(
                "T5Gemma2Backbone builds the text encoder-decoder only: "
                "`vision_encoder` must be None (keras-hub's vision tower "
                "is not built here). Received: "
                f"vision_encoder={type(vision_encoder).__name__}."
            )
        if cross_attention_hidden_size not in (None, encoder_hidden_dim) or (
            encoder_hidden_dim != decoder_hidden_dim
        ):
            raise ValueError(
                "T5Gemma 2's merged attention projects the encoder's "
                "outputs with the decoder's key and value kernels: "
                "`encoder_hidden_dim`, `decoder_hidden_dim` and "
                "`cross_attention_hidden_size` (if given) must be equal. "
                f"Received: encoder_hidden_dim={encoder_hidden_dim}, "
                f"decoder_hidden_dim={decoder_hidden_dim}, "
                f"cross_attention_hidden_size={cross_attention_hidden_size}."
            )
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
            use_query_key_norm=use_query_key_norm,
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

        def rope(layer_type, local_wavelength, global_factor):
            if layer_type == "sliding_attention":
                return dict(
                    rope_wavelength=local_wavelength,
                    rope_scaling_factor=1.0,
                    sliding_window_size=sliding_window,
                )
            return dict(
                rope_wavelength=GLOBAL_ROPE_WAVELENGTH,
                rope_scaling_factor=global_factor,
            )

        def default(value, fallback):
            return fallback if value is None else value

        encoder_blocks = [
            T5GemmaEncoderBlock(
                t5gemma_attention(
                    "self_attention",
                    num_query_heads=encoder_num_attention_heads,
                    num_key_value_heads=encoder_num_key_value_heads,
                    head_dim=encoder_head_dim,
                    centered_sliding_window=True,
                    **rope(
                        layer_type,
                        default(
                            encoder_rope_max_wavelength, rope_max_wavelength
                        ),
                        default(
                            encoder_global_rope_scaling_factor,
                            global_rope_scaling_factor,
                        ),
                    ),
                    **shared,
                ),
                encoder_intermediate_dim,
                name=f"encoder_layer_{i}",
                **block_options,
            )
            for i, layer_type in enumerate(encoder_layer_types)
        ]
        decoder_blocks = [
            T5Gemma2DecoderBlock(
                t5gemma_attention(
                    "merged_attention",
                    num_query_heads=decoder_num_attention_heads,
                    num_key_value_heads=decoder_num_key_value_heads,
                    head_dim=decoder_head_dim,
                    attention_class=MergedSelfCrossAttention,
                    **rope(
                        layer_type,
                        rope_max_wavelength,
                        global_rope_scaling_factor,
                    ),
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
