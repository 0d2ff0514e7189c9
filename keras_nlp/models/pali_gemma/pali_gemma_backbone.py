"""PaliGemma (1 and 2) backbone: images and a prompt in, hidden states out."""

import keras
from keras import ops

from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import MODEL
from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.layers.vit_encoder import VisionTransformerEncoder
from keras_nlp.layers.vit_encoder import vision_transformer_rules
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.decoder import DecoderStack
from keras_nlp.models.functional import init_functional
from keras_nlp.models.gemma.gemma_backbone import build_gemma_stack_from
from keras_nlp.models.gemma.gemma_decoder_block import FEEDFORWARD_NAMES
from keras_nlp.models.pali_gemma.pali_gemma_presets import PALI_GEMMA_PRESETS

# The projection of image tokens into the text's residual stream.
PROJECTION_DIMS = ("vision_hidden", "hidden")


def pali_gemma_vision_tower(
    *,
    image_size,
    patch_size,
    hidden_dim,
    num_layers,
    num_heads,
    intermediate_dim,
    output_dim,
    activation,
    dtype,
    name,
):
    """keras-hub's vision sub-model: a SigLIP ViT, then a dense projection.

    The layers are built outside the sub-model's name scope, so that the
    variable paths start with `image_encoder/` and `image_classifier/`
    while the weights file nests them under the sub-model.

    Args:
        image_size, patch_size, hidden_dim, num_layers, num_heads,
            intermediate_dim: the `VisionTransformerEncoder`'s.
        output_dim: int. Width of the projected image tokens.
        activation: activation or `None`, applied to the projection.
        dtype: dtype or `keras.DTypePolicy`.
        name: the sub-model's name.

    Returns:
        A functional `keras.Model` from `(batch, image_size, image_size, 3)`
        images to `(batch, num_patches, output_dim)` image tokens.
    """
    images = keras.Input(shape=(image_size, image_size, 3), name="images")
    encoder = VisionTransformerEncoder(
        image_size=image_size,
        patch_size=patch_size,
        hidden_dim=hidden_dim,
        num_layers=num_layers,
        num_heads=num_heads,
        intermediate_dim=intermediate_dim,
        dtype=dtype,
        name="image_encoder",
    )
    projection = named_dense(
        output_dim,
        PROJECTION_DIMS,
        activation=activation,
        dtype=dtype,
        name="image_classifier",
    )
    tower = keras.Model(images, projection(encoder(images)), name=name)
    # Functional models drop `dtype`: the tower reports the policy its
    # layers run under, like every other sublayer.
    if dtype is not None:
        tower.dtype_policy = keras.dtype_policies.get(dtype)
    return tower


class PrefixLMMask(keras.layers.Layer):
    """PaliGemma's attention mask over `[image tokens, text tokens]`.

    A key is visible to every query if it is an image token or a real,
    non-response text token (the prefix attends bidirectionally), and to
    the queries at or after it if it is a response token (the response is
    causal). With `sliding_window_size`, pairs further apart than the window
    on either side are masked too (keras-hub's symmetric band).

    Args:
        num_image_tokens: int. Image tokens before the text.
        sliding_window_size: int or `None`.

    Call arguments:
        padding_mask: `(batch, text_len)`, non-zero for real text tokens.
        response_mask: `(batch, text_len)`, non-zero for response tokens.

    Returns:
        A boolean `(batch, length, length)` mask, `length = num_image_tokens
        + text_len`.
    """

    def __init__(self, num_image_tokens, sliding_window_size=None, **kwargs):
        super().__init__(**kwargs)
        self.num_image_tokens = num_image_tokens
        self.sliding_window_size = sliding_window_size

    def call(self, padding_mask, response_mask):
        def with_image_tokens(mask, value):
            mask = ops.cast(mask, "bool")
            return ops.pad(
                mask,
                ((0, 0), (self.num_image_tokens, 0)),
                constant_values=value,
            )

        valid = with_image_tokens(padding_mask, True)[:, None, :]
        response = with_image_tokens(response_mask, False)[:, None, :]
        positions = ops.arange(ops.shape(valid)[-1], dtype="int32")
        distance = positions[:, None] - positions[None, :]
        causal = (distance >= 0)[None]
        mask = ops.logical_or(
            ops.logical_and(valid, ops.logical_not(response)),
            ops.logical_and(causal, response),
        )
        if self.sliding_window_size is not None:
            window = ops.abs(distance) < self.sliding_window_size
            mask = ops.logical_and(mask, window[None])
        return mask

    def compute_output_shape(self, padding_mask_shape, response_mask_shape):
        length = padding_mask_shape[1]
        if length is not None:
            length += self.num_image_tokens
        return (padding_mask_shape[0], length, length)

    def compute_output_spec(self, padding_mask, response_mask):
        # Boolean, where Keras would assume the compute dtype.
        shape = self.compute_output_shape(
            padding_mask.shape, response_mask.shape
        )
        return keras.KerasTensor(shape, dtype="bool")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_image_tokens": self.num_image_tokens,
                "sliding_window_size": self.sliding_window_size,
            }
        )
        return config


class PaliGemmaBackbone(Backbone):
    """PaliGemma: a SigLIP ViT whose patches prefix a Gemma decoder's text.

    Images go through a pre-norm ViT (`image_encoder`: a conv patch
    embedding, learned positions, `vit_num_layers` blocks and a final
    layer norm) and a dense projection to `hidden_dim`
    (`image_classifier`); the projected patches are followed by the scaled
    token embeddings, and the Gemma (or Gemma 2) decoder runs over both
    with a prefix-LM mask: image tokens and the prompt attend to each other
    bidirectionally, the response (`response_mask`) causally. The output
    covers image and text positions, `(batch, num_patches + text_len,
    hidden_dim)`.

    Args:
        vocabulary_size: int. Rows of the (tied) token embedding.
        image_size: int. Height and width of the (square) input images.
        num_layers: int. Number of decoder blocks.
        num_query_heads: int. Query heads per decoder attention layer.
        num_key_value_heads: int. Key/value heads; must divide
            `num_query_heads`.
        hidden_dim: int. Width of the decoder's residual stream.
        intermediate_dim: int. Twice the width of each decoder feed-forward
            branch, as in `GemmaBackbone`.
        head_dim: int. Size of each decoder attention head.
        vit_patch_size: int. Height and width of each image patch.
        vit_num_heads: int. Attention heads of the vision blocks.
        vit_hidden_dim: int. Width of the vision tower.
        vit_num_layers: int. Number of vision blocks.
        vit_intermediate_dim: int or `None`. MLP width of the vision blocks;
            `None` means `4304` (SigLIP So400m). Defaults to `None`.
        vit_pooling: Must be `None`: every patch becomes a token (keras-hub's
            pooled variants give one vector, which cannot prefix the text).
        vit_classifier_activation: activation or `None`. Applied to the
            projected image tokens. Defaults to `None`.
        vit_name: string or `None`. Name of keras-hub's vision sub-model;
            kept for config compatibility (it names no variable path).
        query_head_dim_normalize: bool. Scale queries by `head_dim ** -0.5`
            if `True`, else by `(hidden_dim // num_query_heads) ** -0.5`.
            Defaults to `True`.
        use_post_ffw_norm: bool. Gemma 2's post-feed-forward norm. Defaults
            to `False`.
        use_post_attention_norm: bool. Gemma 2's post-attention norm.
            Defaults to `False`.
        attention_logit_soft_cap: float or `None`. Soft cap of the decoder's
            attention logits. Defaults to `None`.
        final_logit_soft_cap: float or `None`. Soft cap applied by the token
            embedding when projecting back to the vocabulary; it does not
            affect this model's output. Defaults to `None`.
        use_sliding_window_attention: bool. If `True`, decoder blocks with
            an even index attend only within `sliding_window_size` positions
            on either side. Defaults to `False`.
        sliding_window_size: int. Width of that window. Defaults to `4096`.
        layer_norm_epsilon: float. Epsilon of the decoder's norms (the
            vision tower's are `1e-6`). Defaults to `1e-6`.
        dropout: float. Decoder dropout rate in training. Defaults to `0`.
        dtype: string or `keras.DTypePolicy`. Variable and compute dtype.
        **kwargs: Forwarded to `keras.Model` (e.g. `name`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.pali_gemma import PaliGemmaBackbone

    model = PaliGemmaBackbone(
        vocabulary_size=64,
        image_size=16,
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=1,
        hidden_dim=32,
        intermediate_dim=64,
        head_dim=8,
        vit_patch_size=8,
        vit_num_heads=2,
        vit_hidden_dim=16,
        vit_num_layers=1,
        vit_intermediate_dim=32,
    )
    inputs = {
        "images": np.random.uniform(size=(2, 16, 16, 3)),
        "token_ids": np.array([[5, 9, 2, 7], [3, 4, 0, 0]], dtype="int32"),
        "padding_mask": np.array([[1, 1, 1, 1], [1, 1, 0, 0]], dtype="int32"),
        "response_mask": np.array([[0, 0, 1, 1], [0, 1, 0, 0]], dtype="int32"),
    }
    hidden_states = model(inputs)  # shape (2, 4 + 4, 32): patches, then text
    ```
    """

    # Sequence and context parallelism split one length, `token_ids`: here
    # image patches prefix the text in the residual stream.
    sequence_splittable = False

    presets = PALI_GEMMA_PRESETS
    # keras-hub's default LoRA targets: the decoder's and the ViT's.
    lora_target_names = ("query", "value", "query_proj", "value_proj")

    @staticmethod
    def _layout_rules(config):
        # Vision paths start with `image_`, text paths never do. Gemma's
        # rules, except that key/value heads the model axis does not divide
        # (PaliGemma's 1, PaliGemma 2 3B's 4 on 8 devices) put hidden on it.
        block = r"decoder_block_\d+/"
        return [
            *vision_transformer_rules("image_encoder/"),
            named_rule(
                "image_classifier/kernel",
                PROJECTION_DIMS,
                {"vision_hidden": DATA, "hidden": MODEL},
            ),
            *token_embedding_rules("token_embedding/", tied=True),
            *attention_rules(
                block + "attention/",
                heads_first=True,
                hidden_if_heads_indivisible=True,
            ),
            *feedforward_rules(block, sublayer_names=FEEDFORWARD_NAMES),
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
        vit_patch_size,
        vit_num_heads,
        vit_hidden_dim,
        vit_num_layers,
        vit_intermediate_dim=None,
        vit_pooling=None,
        vit_classifier_activation=None,
        vit_name=None,
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
        if vit_pooling is not None:
            raise ValueError(
                "PaliGemmaBackbone prefixes the text with every image patch: "
                f"`vit_pooling` must be None. Received: {vit_pooling!r}."
            )
        self.image_sequence_length = (image_size // vit_patch_size) ** 2
        vision_options = dict(
            image_size=image_size,
            patch_size=vit_patch_size,
            hidden_dim=vit_hidden_dim,
            num_layers=vit_num_layers,
            num_heads=vit_num_heads,
            intermediate_dim=vit_intermediate_dim or 4304,
            output_dim=hidden_dim,
            activation=vit_classifier_activation,
            dtype=dtype,
            name=vit_name or "pali_gemma_vit",
        )
        window_options = dict(
            use_sliding_window_attention=use_sliding_window_attention,
            sliding_window_size=sliding_window_size,
        )
        build_gemma_stack_from(
            self,
            locals(),
            # Gemma's `intermediate_dim` counts both branches.
            ffw_dim=intermediate_dim // 2,
            # The window is in the prefix-LM mask (symmetric, unlike the
            # attention layer's causal window).
            attention_options=lambda index: {},
            init_graph=self._graph(vision_options, window_options, dtype),
        )

    @staticmethod
    def _graph(vision_options, window_options, dtype):
        """`init_graph` for `build_gemma_stack`: image tokens, then text.

        The vision tower (`pali_gemma_vision_tower(**vision_options)`) is
        built here, after the decoder's layers. Its projected patches
        precede the text embeddings, and every block attends under a
        prefix-LM mask (`PrefixLMMask`), windowed as `window_options` say.
        """

        def init_graph(backbone, embed, blocks, final_norm, **kwargs):
            backbone.vit_encoder = pali_gemma_vision_tower(**vision_options)
            image_size = vision_options["image_size"]
            inputs = {
                "images": keras.Input(
                    shape=(image_size, image_size, 3), name="images"
                ),
                **{
                    name: keras.Input(shape=(None,), dtype="int32", name=name)
                    for name in ("token_ids", "padding_mask", "response_mask")
                },
            }
            # Cached decoding (`PaliGemmaCausalLM`) runs the text stack
            # itself, after the image tokens; its caches are planned from it.
            backbone.decoder_stack = DecoderStack(embed, blocks, final_norm)
            image_tokens = backbone.vit_encoder(inputs["images"])
            x = ops.concatenate(
                [image_tokens, embed(inputs["token_ids"])], axis=1
            )
            # Local (windowed) and global blocks alternate, local first.
            masks = {
                window: PrefixLMMask(
                    backbone.image_sequence_length,
                    window,
                    dtype=dtype,
                    name="global_mask" if window is None else "local_mask",
                )(inputs["padding_mask"], inputs["response_mask"])
                for window in {None, backbone._window(0, **window_options)}
            }
            for index, block in enumerate(blocks):
                mask = masks[backbone._window(index, **window_options)]
                x = block(x, attention_mask=mask)
            init_functional(
                backbone, inputs=inputs, outputs=final_norm(x), **kwargs
            )

        return init_graph

    @staticmethod
    def _window(index, use_sliding_window_attention, sliding_window_size):
        local = use_sliding_window_attention and index % 2 == 0
        return sliding_window_size if local else None
