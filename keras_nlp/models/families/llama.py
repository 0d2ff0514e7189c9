"""The Llama-style decoder stack: Llama, Mistral, Mixtral, Qwen, Qwen 3, Phi-3.

Token embedding, then pre-norm blocks of RMSNorm, grouped-query attention
with a rotary embedding and a SwiGLU feed-forward (or any feed-forward
layer, such as a mixture of experts), then a final RMSNorm. The members
differ only in the arguments of `build_llama_style`: the RoPE variant,
attention options (head_dim, biases, query/key norms, sliding window),
tied embeddings and the feed-forward. Members with an attention of their
own (Llama 4, DeepSeek-V3) build the same stack with `build_decoder_stack`.
"""

import keras

from keras_nlp.layers.cached_attention import CachedGroupedQueryAttention
from keras_nlp.layers.decoder_block import DecoderBlock
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.layers.layout_rules import token_embedding_rules
from keras_nlp.layers.rotary_embedding import RotaryEmbedding
from keras_nlp.layers.token_and_position_embedding import token_embedding
from keras_nlp.models.construction import builder_from
from keras_nlp.models.decoder import init_decoder_graph

# The constructor arguments that `build_llama_style_from` passes on as
# they are (those a backbone has): every member names them alike.
SHARED_ARGUMENTS = (
    "vocabulary_size",
    "num_layers",
    "hidden_dim",
    "num_query_heads",
    "num_key_value_heads",
    "head_dim",
    "layer_norm_epsilon",
    "dropout",
    "tie_word_embeddings",
    "dtype",
)
BLOCK = r"transformer_layer_\d+/"


def check_llama_style_arguments(hidden_dim, num_query_heads, head_dim=None):
    """Raises a `ValueError` unless the attention heads fit.

    `hidden_dim` must split into `num_query_heads` heads unless a
    `head_dim` is given, and the head size must be even (RoPE rotates
    pairs of features). That every size is a positive integer is checked
    by `Backbone` for every backbone.
    """
    if head_dim is None and hidden_dim % num_query_heads:
        raise ValueError(
            "`hidden_dim` must be a multiple of `num_query_heads` when "
            f"`head_dim` is None. Received: hidden_dim={hidden_dim}, "
            f"num_query_heads={num_query_heads}."
        )
    size = head_dim or hidden_dim // num_query_heads
    if size % 2:
        given = "" if head_dim else "hidden_dim // num_query_heads, "
        raise ValueError(
            "RoPE rotates pairs of features, so the head size must be even. "
            f"Received: {given}head_dim={size}."
        )


def plain_rotary_embedding(max_wavelength, scaling_factor, dtype):
    """A `rotary_embedding` factory for `build_llama_style`: plain RoPE with
    linear position scaling, named as the checkpoints name it."""
    return lambda: RotaryEmbedding(
        max_wavelength=max_wavelength,
        scaling_factor=scaling_factor,
        dtype=dtype,
        name="rotary_embedding",
    )


def build_llama_style(
    backbone,
    *,
    vocabulary_size,
    num_layers,
    hidden_dim,
    num_query_heads,
    num_key_value_heads,
    rotary_embedding,
    intermediate_dim=None,
    feedforward=None,
    head_dim=None,
    layer_norm_epsilon=1e-6,
    dropout=0.0,
    tie_word_embeddings=False,
    attention_options=None,
    attention_name="self_attention",
    block_names=None,
    dtype=None,
    **kwargs,
):
    """Builds a Llama-style stack into `backbone` and initializes its graph.

    Sets `backbone.token_embedding`, `backbone.transformer_layers`
    (`transformer_layer_{i}`) and `backbone.layer_norm`
    (`sequence_output_layernorm`), the checkpoints' names.

    Args:
        backbone: the backbone being constructed.
        vocabulary_size, num_layers, hidden_dim, num_query_heads,
            num_key_value_heads, head_dim, layer_norm_epsilon, dropout,
            tie_word_embeddings: as in `LlamaBackbone`.
        rotary_embedding: callable returning a new
            `keras_nlp.layers.RotaryEmbedding` (named `rotary_embedding`)
            for one block.
        intermediate_dim: int, the width of the SwiGLU feed-forward.
        feedforward: callable mapping a block index to a new feed-forward
            layer for that block (e.g. a `SparseMoE`), used instead of the
            SwiGLU one.
        attention_options: dict of further `CachedGroupedQueryAttention`
            arguments (`use_bias`, `use_query_key_norm`,
            `sliding_window_size`, ...), or a callable mapping a block
            index to such a dict (e.g. windows on alternate blocks).
        attention_name: the attention layer's name in each block.
        block_names: `DecoderBlock` `sublayer_names` of the checkpoint.
        dtype: dtype or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (`name`, ...).
    """
    check_llama_style_arguments(hidden_dim, num_query_heads, head_dim)
    kernel_initializer = keras.initializers.RandomNormal(stddev=0.02)

    def attention(index):
        options = attention_options or {}
        if callable(options):
            options = options(index)
        return CachedGroupedQueryAttention(
            num_query_heads=num_query_heads,
            num_key_value_heads=num_key_value_heads,
            head_dim=head_dim,
            rotary_embedding=rotary_embedding(),
            dropout=dropout,
            kernel_initializer=kernel_initializer,
            dtype=dtype,
            name=attention_name,
            **options,
        )

    build_decoder_stack(
        backbone,
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        hidden_dim=hidden_dim,
        attention=attention,
        intermediate_dim=intermediate_dim,
        feedforward=feedforward,
        layer_norm_epsilon=layer_norm_epsilon,
        dropout=dropout,
        tie_word_embeddings=tie_word_embeddings,
        kernel_initializer=kernel_initializer,
        block_names=block_names,
        dtype=dtype,
        **kwargs,
    )


def build_decoder_stack(
    backbone,
    *,
    vocabulary_size,
    num_layers,
    hidden_dim,
    attention,
    intermediate_dim=None,
    feedforward=None,
    layer_norm_epsilon=1e-6,
    dropout=0.0,
    tie_word_embeddings=False,
    kernel_initializer=None,
    block_names=None,
    dtype=None,
    **kwargs,
):
    """Builds a pre-norm decoder stack with any attention into `backbone`.

    What `build_llama_style` builds, for members whose attention is their
    own (Llama 4's chunked attention, DeepSeek-V3's latent attention):
    token embedding, `num_layers` `DecoderBlock`s (RMSNorm, `attention`,
    RMSNorm, SwiGLU or `feedforward`), a final RMSNorm, then the graph.
    Sets `backbone.token_embedding`, `backbone.transformer_layers` and
    `backbone.layer_norm` under the checkpoints' names.

    Args:
        backbone: the backbone being constructed.
        attention: callable mapping a block index to that block's new
            attention layer (named as the checkpoint names it).
        feedforward: callable mapping a block index to a new feed-forward
            layer, or to `None` for the SwiGLU of `intermediate_dim`.
        kernel_initializer: the blocks' kernel initializer; defaults to
            a normal of standard deviation 0.02.
        vocabulary_size, num_layers, hidden_dim, intermediate_dim,
            layer_norm_epsilon, dropout, tie_word_embeddings, block_names,
            dtype, **kwargs: as in `build_llama_style`.
    """
    if kernel_initializer is None:
        kernel_initializer = keras.initializers.RandomNormal(stddev=0.02)
    backbone.token_embedding = token_embedding(
        vocabulary_size,
        hidden_dim,
        tie_weights=tie_word_embeddings,
        dtype=dtype,
    )
    backbone.transformer_layers = []
    for index in range(num_layers):
        block_attention = attention(index)
        backbone.transformer_layers.append(
            DecoderBlock(
                attention=block_attention,
                hidden_dim=hidden_dim,
                intermediate_dim=intermediate_dim,
                feedforward=feedforward(index) if feedforward else None,
                activation="silu",
                layer_norm_epsilon=layer_norm_epsilon,
                dropout=dropout,
                kernel_initializer=kernel_initializer,
                sublayer_names=block_names,
                dtype=dtype,
                name=f"transformer_layer_{index}",
            )
        )
    backbone.layer_norm = keras.layers.RMSNormalization(
        epsilon=layer_norm_epsilon,
        dtype=dtype,
        name="sequence_output_layernorm",
    )
    init_decoder_graph(
        backbone,
        embed=backbone.token_embedding,
        blocks=backbone.transformer_layers,
        final_norm=backbone.layer_norm,
        dtype=dtype,
        **kwargs,
    )


def build_llama_style_from(backbone, arguments, **options):
    """`build_llama_style` with a backbone constructor's own arguments.

    Passes on the constructor's `SHARED_ARGUMENTS` (those it has; the
    others keep `build_llama_style`'s defaults), its `intermediate_dim`
    unless `options` give a `feedforward`, and its `**kwargs`. Without a
    `rotary_embedding` in `options`, the blocks get
    `plain_rotary_embedding` of its `rope_max_wavelength` and
    `rope_scaling_factor`.

    Args:
        backbone: the backbone being constructed.
        arguments: dict, the constructor's `locals()`; a local variable
            must not reuse the name of a shared argument.
        **options: the member's own `build_llama_style` arguments
            (`rotary_embedding`, `attention_options`, `feedforward`, ...).
    """
    if "feedforward" not in options:
        options["intermediate_dim"] = arguments["intermediate_dim"]
    if "rotary_embedding" not in options:
        options["rotary_embedding"] = plain_rotary_embedding(
            arguments["rope_max_wavelength"],
            arguments["rope_scaling_factor"],
            arguments["dtype"],
        )
    _build_from_arguments(backbone, arguments, **options)


def llama_style_rules(
    tied, feedforward=None, attention="self_attention", **attention_options
):
    """Layout rules of a `build_llama_style` stack.

    Args:
        tied: bool. Whether the output projection is the token embedding.
        feedforward: the feed-forwards' rules; `None` for the SwiGLU's.
        attention: the attention layer's name in each block.
        **attention_options: further `attention_rules` arguments.
    """
    return [
        *token_embedding_rules("token_embedding/", tied=tied),
        *attention_rules(BLOCK + attention + "/", **attention_options),
        *(feedforward_rules(BLOCK) if feedforward is None else feedforward),
    ]


_build_from_arguments = builder_from(build_llama_style, SHARED_ARGUMENTS)
