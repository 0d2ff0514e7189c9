"""Gemma 3 decoder backbone, with an optional vision encoder."""

import keras
from keras import ops

from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import MODEL
from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.layers.vit_encoder import vision_transformer_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.decoder import DecoderStack
from keras_nlp.models.functional import init_functional
from keras_nlp.models.gemma.gemma_backbone import build_gemma_stack_from
from keras_nlp.models.gemma.gemma_backbone import gemma_layout_rules
from keras_nlp.models.gemma3.gemma3_presets import GEMMA3_PRESETS
from keras_nlp.models.gemma3.gemma3_vision_encoder import PROJECTION_DIMS
from keras_nlp.models.gemma3.gemma3_vision_encoder import Gemma3VisionEncoder

# With sliding windows on, every sixth block (indices 5, 11, ...) attends
# globally and the other five locally.
GLOBAL_LAYER_PERIOD = 6
LOCAL_ROPE_WAVELENGTH = 10_000.0
GLOBAL_ROPE_WAVELENGTH = 1_000_000.0
# The embedding head's kernels: the mean-pooled hidden state to the pooling
# width, then that to the embedding width.
POOLING_DIMS = ("hidden", "pooling_intermediate")
EMBEDDING_PROJECTION_DIMS = ("pooling_intermediate", "embedding")


# The values of `layer_types` (Hugging Face's names).
LAYER_TYPES = ("sliding_attention", "full_attention")


def is_local_layer(index, use_sliding_window_attention):
    """Whether block `index` uses the sliding window (a "local" layer) in
    the default pattern: five local blocks, then one global."""
    return (
        use_sliding_window_attention
        and index % GLOBAL_LAYER_PERIOD < GLOBAL_LAYER_PERIOD - 1
    )


def local_layers(num_layers, use_sliding_window_attention, layer_types=None):
    """Whether each block is local: as `layer_types` says, or else in the
    default pattern (`is_local_layer`).

    Raises:
        ValueError: `layer_types` is not a list of `num_layers` of
            `LAYER_TYPES`, or has sliding layers while
            `use_sliding_window_attention` is off.
    """
    if layer_types is None:
        return [
            is_local_layer(i, use_sliding_window_attention)
            for i in range(num_layers)
        ]
    if (
        not isinstance(layer_types, (list, tuple))
        or len(layer_types) != num_layers
        or not all(t in LAYER_TYPES for t in layer_types)
    ):
        raise ValueError(
            f"`layer_types` must be a list of {num_layers} (num_layers) of "
            f"{LAYER_TYPES}, one per block, or None. Received: "
            f"layer_types={layer_types!r}."
        )
    local = [t == "sliding_attention" for t in layer_types]
    if any(local) and not use_sliding_window_attention:
        raise ValueError(
            "`layer_types` has sliding_attention blocks but "
            "use_sliding_window_attention=False; pass "
            "use_sliding_window_attention=True to use the window."
        )
    return local


def vision_encoder_from(value):
    """A `Gemma3VisionEncoder` from an instance, `None` or a config dict.

    A dict is a serialized encoder, ours or keras-hub's (same arguments),
    as `get_config` and preset files hold it; it is built here, so inside
    any active distribution scope.
    """
    if value is None or isinstance(value, keras.Model):
        return value
    if isinstance(value, dict):
        if value.get("class_name") == "Gemma3VisionEncoder":
            config = dict(value["config"])
            config.pop("build_config", None)
            return Gemma3VisionEncoder.from_config(config)
        if "class_name" not in value:
            return Gemma3VisionEncoder(**value)
    raise ValueError(
        "`vision_encoder` must be None, a Gemma3VisionEncoder or its "
        f"serialized config. Received: {value!r}."
    )


def check_embedding_head_arguments(
    is_embedding_model, pooling_intermediate_dim, embedding_dim
):
    """Raises unless the head's widths are given exactly when it is built.

    That a given width is a positive integer, `Backbone` checks.
    """
    widths = {
        "pooling_intermediate_dim": pooling_intermediate_dim,
        "embedding_dim": embedding_dim,
    }
    received = ", ".join(f"{name}={value!r}" for name, value in widths.items())
    if is_embedding_model and None in widths.values():
        raise ValueError(
            "An embedding model (is_embedding_model=True) needs "
            "`pooling_intermediate_dim` and `embedding_dim`, the widths of "
            f"its two projections. Received: {received}."
        )
    if not is_embedding_model and widths != dict.fromkeys(widths):
        raise ValueError(
            "`pooling_intermediate_dim` and `embedding_dim` size the pooling "
            "head, which only an embedding model has: pass "
            "is_embedding_model=True, or leave both None. Received: "
            f"is_embedding_model={is_embedding_model!r}, {received}."
        )


def embedding_head(pooling_intermediate_dim, embedding_dim, dtype=None):
    """The pooling head of an embedding model, on the final hidden states.

    The mean over real tokens (`mean_pooling`), two bias-free projections
    (`pooling_dense_1` to `pooling_intermediate_dim`, then
    `embedding_projection` to `embedding_dim`) and an L2 normalization
    (`unit_normalization`): the checkpoints' names.

    Returns:
        A callable `(sequence_output, padding_mask) -> pooled_output` of
        shape `(batch, embedding_dim)`.
    """
    mean = keras.layers.GlobalAveragePooling1D(dtype=dtype, name="mean_pooling")
    pooling_dense = named_dense(
        pooling_intermediate_dim,
        POOLING_DIMS,
        name="pooling_dense_1",
        use_bias=False,
        dtype=dtype,
    )
    projection = named_dense(
        embedding_dim,
        EMBEDDING_PROJECTION_DIMS,
        name="embedding_projection",
        use_bias=False,
        dtype=dtype,
    )
    normalize = keras.layers.UnitNormalization(
        axis=-1, dtype=dtype, name="unit_normalization"
    )

    def head(sequence_output, padding_mask):
        # A row without any real token averages nothing and gives NaN
        # (keras-hub's gives zeros); a tokenized text always has one.
        pooled = mean(sequence_output, mask=padding_mask)
        return normalize(projection(pooling_dense(pooled)))

    return head


class InterleaveImageTokens(keras.layers.Layer):
    """Writes image soft tokens into the text embeddings at given indices.

    Row `b` of `vision_indices` lists the text positions of that row's
    image tokens, image after image; unused entries are `0`, so position
    `0` always keeps its text embedding (keras-hub's convention).

    Call arguments:
        image_tokens: `(batch * images_per_row, tokens_per_image, hidden)`.
        text_embeddings: `(batch, length, hidden)`.
        vision_indices: `(batch, images_per_row * tokens_per_image)`.
    """

    def call(self, image_tokens, text_embeddings, vision_indices):
        batch = ops.shape(text_embeddings)[0]
        length = ops.shape(text_embeddings)[1]
        hidden = ops.shape(text_embeddings)[2]
        flat = ops.reshape(text_embeddings, (batch * length, hidden))
        row_starts = ops.arange(batch, dtype="int32") * length
        positions = ops.cast(vision_indices, "int32") + row_starts[:, None]
        updates = ops.reshape(image_tokens, (-1, hidden))
        updated = ops.scatter_update(
            flat, ops.reshape(positions, (-1, 1)), updates
        )
        # Undo any write to position 0 (the padding of `vision_indices`).
        updated = ops.scatter_update(
            updated, row_starts[:, None], ops.take(flat, row_starts, axis=0)
        )
        return ops.reshape(updated, (batch, length, hidden))

    def compute_output_shape(
        self, image_tokens_shape, text_embeddings_shape, vision_indices_shape
    ):
        return text_embeddings_shape


class VisionAttentionMask(keras.layers.Layer):
    """Causal attention, bidirectional within each image, over real keys.

    A query sees earlier real tokens, and every token of the image it
    belongs to (images are runs of `vision_mask`); with
    `sliding_window_size`, only keys within the window on either side.

    Args:
        sliding_window_size: int or `None`.

    Call arguments:
        padding_mask: `(batch, length)`, non-zero for real tokens.
        vision_mask: `(batch, length)`, non-zero for image tokens.

    Returns:
        A boolean `(batch, length, length)` mask.
    """

    def __init__(self, sliding_window_size=None, **kwargs):
        super().__init__(**kwargs)
        self.sliding_window_size = sliding_window_size

    def call(self, padding_mask, vision_mask):
        vision = ops.cast(ops.cast(vision_mask, "bool"), "int32")
        previous = ops.pad(vision[:, :-1], ((0, 0), (1, 0)))
        # Number the images 1, 2, ... from where each run starts.
        image_id = ops.cumsum(ops.cast(vision > previous, "int32"), axis=-1)
        image_id = image_id * vision
        same_image = ops.logical_and(
            ops.equal(image_id[:, :, None], image_id[:, None, :]),
            (image_id > 0)[:, :, None],
        )
        positions = ops.arange(ops.shape(vision)[1], dtype="int32")
        distance = positions[:, None] - positions[None, :]
        mask = ops.logical_or((distance >= 0)[None], same_image)
        mask = ops.logical_and(mask, ops.cast(padding_mask, "bool")[:, None, :])
        if self.sliding_window_size is not None:
            window = ops.abs(distance) < self.sliding_window_size
            mask = ops.logical_and(mask, window[None])
        return mask

    def compute_output_shape(self, padding_mask_shape, vision_mask_shape):
        length = padding_mask_shape[1]
        return (padding_mask_shape[0], length, length)

    def compute_output_spec(self, padding_mask, vision_mask):
        # Boolean, where Keras would assume the compute dtype.
        shape = self.compute_output_shape(padding_mask.shape, vision_mask.shape)
        return keras.KerasTensor(shape, dtype="bool")

    def get_config(self):
        config = super().get_config()
        config["sliding_window_size"] = self.sliding_window_size
        return config


class Gemma3Backbone(Backbone):
    """Gemma 3 decoder mapping token ids (and images) to hidden states.

    Gemma 2's block (pre- and optional post-norms, GeGLU feed-forward,
    tied and scaled token embedding) with RMS-normalized query and key heads
    and interleaved attention: with `use_sliding_window_attention`, five
    local blocks (sliding window, RoPE wavelength 10k) alternate with one
    global block (full causal attention, RoPE wavelength 1M). With a
    `vision_encoder`, each image's soft tokens replace the text embeddings
    at its `vision_indices`, and the tokens of one image attend to each
    other bidirectionally (`vision_mask`); the text stays causal. An
    embedding model (`is_embedding_model=True`) adds a pooling head: the
    mean of the final hidden states over real tokens, two bias-free
    projections and an L2 normalization.

    Args:
        vocabulary_size: int. Number of rows of the (tied) token embedding.
        image_size: int or `None`. Height and width of the input images
            (the vision encoder's); unused by a text-only model.
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
            sixth one attend only within a local window (or those that
            `layer_types` says). Defaults to `False` (every block is
            global).
        sliding_window_size: int. Width of that window. Defaults to `1024`.
        local_rope_scaling_factor: float. RoPE position scaling of the local
            blocks. Defaults to `1.0`.
        global_rope_scaling_factor: float. RoPE position scaling of the
            global blocks. Defaults to `1.0`.
        vision_encoder: `None` (text only), a `Gemma3VisionEncoder`, or
            its serialized config (ours or keras-hub's), which is built
            here, inside any active distribution scope: pass a config to
            shard it. The inputs are then `token_ids`, `padding_mask`,
            `images` `(batch, images_per_row, image_size, image_size, 3)`,
            `vision_indices` `(batch, images_per_row * tokens_per_image)`
            and `vision_mask` `(batch, length)`. Defaults to `None`.
        layer_norm_epsilon: float. Epsilon of every normalization. Defaults
            to `1e-6`.
        use_bidirectional_attention: bool. If `True`, tokens attend to
            tokens on both sides (sliding windows are centered). Defaults to
            `False`.
        dropout: float. Dropout rate used in training. Defaults to `0`.
        is_embedding_model: bool. If `True`, the outputs are a dict:
            `"sequence_output"` (the hidden states) and `"pooled_output"`
            `(batch, embedding_dim)`, unit-length embeddings of the mean
            over real tokens (`padding_mask`). Defaults to `False` (the
            hidden states alone).
        pooling_intermediate_dim: int. Width of the head's first projection
            (`pooling_dense_1`); required by, and only allowed with,
            `is_embedding_model=True`. Defaults to `None`.
        embedding_dim: int. Width of the head's second projection
            (`embedding_projection`), the pooled output's; required by,
            and only allowed with, `is_embedding_model=True`. Defaults to
            `None`.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
            Normalizations and attention softmaxes always run in float32.
        layer_types: list of str or `None`. Keyword-only. With
            `use_sliding_window_attention`, which blocks are local: one of
            `"sliding_attention"` (local: window, local RoPE) or
            `"full_attention"` (global) per block, as Hugging Face's
            `layer_types`. Defaults to `None`: five local, one global.
        query_pre_attn_scalar: float or `None`. Keyword-only. Scale queries
            by `query_pre_attn_scalar ** -0.5` (Hugging Face's field), for
            a value that is neither `head_dim` nor
            `hidden_dim // num_query_heads`; it replaces
            `query_head_dim_normalize`. Defaults to `None` (that flag
            decides).
        **kwargs: Forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.gemma3.gemma3_backbone import Gemma3Backbone

    config = dict(
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
    model = Gemma3Backbone(**config)
    inputs = {
        "token_ids": np.array([[5, 9, 2, 7], [0, 0, 3, 4]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4, 32)

    embedder = Gemma3Backbone(
        **config,
        use_bidirectional_attention=True,
        is_embedding_model=True,
        pooling_intermediate_dim=64,
        embedding_dim=16,
    )
    embeddings = embedder(inputs)["pooled_output"]  # shape (2, 16), unit rows
    ```
    """

    presets = GEMMA3_PRESETS
    # A preset's config.json holds the vision encoder serialized; loading
    # accepts this class only (keras_nlp.saving.preset_config).
    serialized_config_arguments = {"vision_encoder": ("Gemma3VisionEncoder",)}

    @staticmethod
    def _layout_rules(config):
        # The q/k norm scales are rank 1 and need no rule. Vision paths
        # start with `image_encoder/` or `vision_`, text paths never do.
        rules = gemma_layout_rules()
        if config.get("vision_encoder") is not None:
            rules += [
                *vision_transformer_rules("image_encoder/"),
                named_rule(
                    "vision_output_encoder/vision_input_projection/kernel",
                    PROJECTION_DIMS,
                    {"vision_hidden": DATA, "hidden": MODEL},
                ),
            ]
        if config.get("is_embedding_model"):
            # Like BERT's pooler: output width on the model axis.
            rules += [
                named_rule(
                    "pooling_dense_1/kernel",
                    POOLING_DIMS,
                    {"hidden": DATA, "pooling_intermediate": MODEL},
                ),
                named_rule(
                    "embedding_projection/kernel",
                    EMBEDDING_PROJECTION_DIMS,
                    {"pooling_intermediate": DATA, "embedding": MODEL},
                ),
            ]
        return rules

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
        *,
        layer_types=None,
        query_pre_attn_scalar=None,
        **kwargs,
    ):
        vision_encoder = vision_encoder_from(vision_encoder)
        check_embedding_head_arguments(
            is_embedding_model, pooling_intermediate_dim, embedding_dim
        )
        local_blocks = local_layers(
            num_layers, use_sliding_window_attention, layer_types
        )

        def attention_options(index):
            local = local_blocks[index]
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

        build_gemma_stack_from(
            self,
            locals(),
            # Unlike Gemma's, `intermediate_dim` is one branch's width.
            ffw_dim=intermediate_dim,
            attention_options=attention_options,
            init_graph=self._graph(
                vision_encoder,
                image_size,
                local_blocks,
                sliding_window_size,
                use_bidirectional_attention,
                (
                    embedding_head(
                        pooling_intermediate_dim, embedding_dim, dtype=dtype
                    )
                    if is_embedding_model
                    else None
                ),
            ),
        )
        if vision_encoder is not None:
            self.num_vision_tokens_per_image = (
                vision_encoder.num_vision_tokens_per_image
            )

    @staticmethod
    def _graph(
        vision_encoder,
        image_size,
        local_blocks,
        sliding_window_size,
        use_bidirectional_attention,
        pooling_head,
    ):
        """`init_graph` for `build_gemma_stack`: images, then pooling.

        Without a vision encoder, the plain decoder graph; with one, its
        image tokens are interleaved into the text and attend within each
        image. With a `pooling_head` (see `embedding_head`), the outputs
        are `{"sequence_output", "pooled_output"}`.
        """

        def init_graph(backbone, embed, blocks, final_norm, **kwargs):
            backbone.vision_encoder = vision_encoder
            int_input = dict(shape=(None,), dtype="int32")
            inputs = {
                "token_ids": keras.Input(name="token_ids", **int_input),
                "padding_mask": keras.Input(name="padding_mask", **int_input),
            }
            # Cached decoding runs the text stack (prompts without images).
            backbone.decoder_stack = DecoderStack(embed, blocks, final_norm)
            x = embed(inputs["token_ids"])
            if vision_encoder is not None:
                inputs["images"] = keras.Input(
                    shape=(None, image_size, image_size, 3), name="images"
                )
                inputs["vision_indices"] = keras.Input(
                    name="vision_indices", **int_input
                )
                inputs["vision_mask"] = keras.Input(
                    name="vision_mask", **int_input
                )
                x = InterleaveImageTokens(name="interleave_embeddings")(
                    vision_encoder(inputs["images"]),
                    x,
                    inputs["vision_indices"],
                )
            masks = {}
            for index, block in enumerate(blocks):
                if vision_encoder is None or use_bidirectional_attention:
                    # No image runs: every block takes the padding mask
                    # (and applies its own causal and window masks).
                    x = block(x, padding_mask=inputs["padding_mask"])
                    continue
                local = local_blocks[index]
                window = sliding_window_size if local else None
                if window not in masks:
                    masks[window] = VisionAttentionMask(
                        window,
                        name="local_mask" if local else "global_mask",
                    )(inputs["padding_mask"], inputs["vision_mask"])
                x = block(x, attention_mask=masks[window])
            outputs = final_norm(x)
            if pooling_head is not None:
                outputs = {
                    "sequence_output": outputs,
                    "pooled_output": pooling_head(
                        outputs, inputs["padding_mask"]
                    ),
                }
            init_functional(backbone, inputs=inputs, outputs=outputs, **kwargs)

        return init_graph

    def get_config(self):
        config = super().get_config()
        if config.get("vision_encoder") is not None:
            config["vision_encoder"] = keras.layers.serialize(
                self.vision_encoder
            )
        return config
