"""Gemma and Gemma 2 decoder backbone."""

import math

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.layers.token_and_position_embedding import TOKEN_EMBEDDING_DIMS
from keras_nlp.layers.zero_centered_rms_normalization import (
    ZeroCenteredRMSNormalization,
)
from keras_nlp.models.backbone import Backbone
from keras_nlp.models.decoder import init_decoder_graph
from keras_nlp.models.gemma.gemma_decoder_block import FEEDFORWARD_NAMES
from keras_nlp.models.gemma.gemma_decoder_block import GemmaDecoderBlock
from keras_nlp.models.gemma.gemma_decoder_block import gemma_attention
from keras_nlp.models.gemma.gemma_presets import GEMMA_PRESETS


def build_gemma_stack(
    backbone,
    *,
    vocabulary_size,
    num_layers,
    num_query_heads,
    num_key_value_heads,
    hidden_dim,
    ffw_dim,
    head_dim,
    query_head_dim_normalize,
    use_post_ffw_norm,
    use_post_attention_norm,
    attention_logit_soft_cap,
    final_logit_soft_cap,
    layer_norm_epsilon,
    dropout,
    attention_options,
    use_bidirectional_attention=False,
    query_pre_attn_scalar=None,
    init_graph=init_decoder_graph,
    dtype=None,
    **kwargs,
):
    """Builds a Gemma-style stack into `backbone` and initializes its graph.

    The tied token embedding scaled by `sqrt(hidden_dim)`, `GemmaDecoderBlock`s
    (`decoder_block_{i}`) and a zero-centered RMS norm
    (`final_normalization`): the checkpoints' names. Sets
    `backbone.token_embedding`, `backbone.transformer_layers` and
    `backbone.layer_norm`.

    Args:
        backbone: the backbone being constructed.
        ffw_dim: int. Width of each feed-forward branch.
        attention_options: callable mapping a block index to a dict of
            further `gemma_attention` arguments for that block (its
            sliding window, RoPE wavelength and scaling, q/k norms).
        query_pre_attn_scalar: float or `None`: queries are scaled by
            `query_pre_attn_scalar ** -0.5` in every block (see
            `gemma_attention`); `None` follows `query_head_dim_normalize`.
        init_graph: wires the functional graph, called like
            `keras_nlp.models.decoder.init_decoder_graph` (the default);
            a multimodal backbone passes its own.
        dtype: dtype or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (`name`, ...).
        The other arguments are `GemmaBackbone`'s.
    """
    backbone.token_embedding = keras.layers.ReversibleEmbedding(
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
    declare_dims(backbone.token_embedding, embeddings=TOKEN_EMBEDDING_DIMS)
    backbone.transformer_layers = [
        GemmaDecoderBlock(
            attention=gemma_attention(
                hidden_dim=hidden_dim,
                num_query_heads=num_query_heads,
                num_key_value_heads=num_key_value_heads,
                head_dim=head_dim,
                query_head_dim_normalize=query_head_dim_normalize,
                query_pre_attn_scalar=query_pre_attn_scalar,
                logit_soft_cap=attention_logit_soft_cap,
                layer_norm_epsilon=layer_norm_epsilon,
                use_bidirectional_attention=use_bidirectional_attention,
                dropout=dropout,
                dtype=dtype,
                **attention_options(index),
            ),
            hidden_dim=hidden_dim,
            intermediate_dim=ffw_dim,
            use_post_attention_norm=use_post_attention_norm,
            use_post_ffw_norm=use_post_ffw_norm,
            layer_norm_epsilon=layer_norm_epsilon,
            use_bidirectional_attention=use_bidirectional_attention,
            dropout=dropout,
            dtype=dtype,
            name=f"decoder_block_{index}",
        )
        for index in range(num_layers)
    ]
    backbone.layer_norm = ZeroCenteredRMSNormalization(
        epsilon=layer_norm_epsilon, dtype=dtype, name="final_normalization"
    )

    def embed(token_ids):
        x = backbone.token_embedding(token_ids)
        return x * ops.cast(ops.sqrt(float(hidden_dim)), x.dtype)

    init_graph(
        backbone,
        embed=embed,
        blocks=backbone.transformer_layers,
        final_norm=backbone.layer_norm,
        dtype=dtype,
        **kwargs,
    )


# The constructor arguments that `build_gemma_stack_from` passes on as they
# are: Gemma, Gemma 3 and PaliGemma name them alike.
SHARED_ARGUMENTS = (
    "vocabulary_size",
    "num_layers",
    "num_query_heads",
    "num_key_value_heads",
    "hidden_dim",
    "head_dim",
    "query_head_dim_normalize",
    "use_post_ffw_norm",
    "use_post_attention_norm",
    "attention_logit_soft_cap",
    "final_logit_soft_cap",
    "layer_norm_epsilon",
    "dropout",
    "dtype",
)


def check_query_pre_attn_scalar(value):
    """Raises a `ValueError` unless `value` is `None` or a positive, finite
    number."""
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            "`query_pre_attn_scalar` must be a positive number (queries are "
            "scaled by its inverse square root) or None. Received: "
            f"query_pre_attn_scalar={value!r}."
        )


def build_gemma_stack_from(backbone, arguments, **options):
    """`build_gemma_stack` with a backbone constructor's own arguments.

    Args:
        backbone: the backbone being constructed.
        arguments: dict, the constructor's `locals()`: its
            `SHARED_ARGUMENTS` are passed on as they are, with its
            `use_bidirectional_attention` and `query_pre_attn_scalar` if it
            has them, and its `**kwargs`.
            A local variable must not reuse the name of one of them.
        **options: the rest of `build_gemma_stack`'s arguments (`ffw_dim`,
            `attention_options`, `init_graph`).
    """
    shared = {name: arguments[name] for name in SHARED_ARGUMENTS}
    for name in ("use_bidirectional_attention", "query_pre_attn_scalar"):
        if name in arguments:
            shared[name] = arguments[name]
    check_query_pre_attn_scalar(arguments.get("query_pre_attn_scalar"))
    build_gemma_stack(backbone, **shared, **options, **arguments["kwargs"])


def gemma_layout_rules():
    """Layout rules of a Gemma-style stack (`build_gemma_stack`)."""
    block = r"decoder_block_\d+/"
    return [
        *token_embedding_rules("token_embedding/", tied=True),
        *attention_rules(block + "attention/", heads_first=True),
        *feedforward_rules(block, sublayer_names=FEEDFORWARD_NAMES),
    ]


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
        query_pre_attn_scalar: float or `None`. Keyword-only. Scale queries
            by `query_pre_attn_scalar ** -0.5` (Hugging Face's Gemma 2
            field), for a value that is neither `head_dim` nor
            `hidden_dim // num_query_heads`; it replaces
            `query_head_dim_normalize`. Defaults to `None` (that flag
            decides).
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
        return gemma_layout_rules()

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
        *,
        query_pre_attn_scalar=None,
        **kwargs,
    ):
        def attention_options(index):
            # Local (windowed) and global attention alternate, local first.
            local = use_sliding_window_attention and index % 2 == 0
            return {
                "sliding_window_size": sliding_window_size if local else None
            }

        build_gemma_stack_from(
            self,
            locals(),
            # Gemma's `intermediate_dim` counts both branches.
            ffw_dim=intermediate_dim // 2,
            attention_options=attention_options,
        )
