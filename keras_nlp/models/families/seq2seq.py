"""The encoder-decoder blocks of BART and Whisper.

`num_layers` `encoder_block`s `transformer_encoder_layer_{i}` and as many
`CrossAttentionDecoderBlock`s `transformer_decoder_layer_{i}` (causal
self-attention, cross-attention over the encoder's outputs, a GELU
feed-forward), every LayerNorm with epsilon 1e-5. The backbones build
their own embeddings (token tables, audio convolutions) around them, and
share the cached decoding loop (`decode_blocks_with_cache`).
"""

from keras_nlp.layers.cross_attention_decoder_block import (
    CrossAttentionDecoderBlock,
)
from keras_nlp.layers.layout_rules import attention_rules
from keras_nlp.layers.layout_rules import feedforward_rules
from keras_nlp.models.families.bert import encoder_block
from keras_nlp.models.families.bert import encoder_block_rules
from keras_nlp.models.functional import init_functional

ENCODER_BLOCK = r"transformer_encoder_layer_\d+/"
DECODER_BLOCK = r"transformer_decoder_layer_\d+/"


def seq2seq_blocks(side, num_layers, initializer, **options):
    """The blocks of one side, named as in the checkpoints.

    Args:
        side: `"encoder"` or `"decoder"`.
        num_layers: int. Blocks of each side.
        initializer: initializer of every kernel (the same object for all).
        **options: the blocks' other arguments: `num_heads`, `hidden_dim`,
            `intermediate_dim`, `dropout` and `dtype` (as in
            `BartBackbone`), and `normalize_first` and `use_key_bias` where
            they differ from BART's.
    """
    options.update(activation="gelu", layer_norm_epsilon=1e-5)
    name = f"transformer_{side}_layer_{{}}"
    if side == "encoder":
        return [
            encoder_block(name.format(i), initializer=initializer, **options)
            for i in range(num_layers)
        ]
    return [
        CrossAttentionDecoderBlock(
            kernel_initializer=initializer, name=name.format(i), **options
        )
        for i in range(num_layers)
    ]


def init_seq2seq_graph(
    backbone,
    inputs,
    encoder_output,
    decoder_input,
    final_norm=None,
    dtype=None,
    **kwargs,
):
    """Runs the decoder blocks over `decoder_input`; initializes the graph.

    Args:
        backbone: the backbone being constructed, with its
            `decoder_transformer_layers`.
        inputs: dict of name -> `keras.Input`, with a
            `decoder_padding_mask` (and an `encoder_padding_mask` where
            the encoder's inputs are padded).
        encoder_output: the encoder's last hidden states.
        decoder_input: the decoder's embedded tokens.
        final_norm: optional layer applied to the decoder's output.
        dtype: dtype or `keras.DTypePolicy`.
        **kwargs: forwarded to `keras.Model` (`name`, ...).
    """
    x = decoder_input
    for block in backbone.decoder_transformer_layers:
        x = block(
            x,
            encoder_output,
            decoder_padding_mask=inputs["decoder_padding_mask"],
            encoder_padding_mask=inputs.get("encoder_padding_mask"),
        )
    init_functional(
        backbone,
        inputs=inputs,
        outputs={
            "encoder_sequence_output": encoder_output,
            "decoder_sequence_output": final_norm(x) if final_norm else x,
        },
        dtype=dtype,
        **kwargs,
    )


def decode_blocks_with_cache(
    blocks,
    x,
    self_attention_caches,
    cross_attention_caches,
    cache_update_index,
    encoder_padding_mask,
    pin=None,
):
    """Runs embedded decoder tokens through `CrossAttentionDecoderBlock`s
    with key/value caches: the loop of BART's and Whisper's
    `decode_with_cache`.

    Args:
        blocks: the backbone's `decoder_transformer_layers`.
        x: the embedded tokens `(batch, seq, hidden_dim)` of slots
            `cache_update_index ... + seq - 1`.
        self_attention_caches: one `(batch, 2, max_len, heads, head_dim)`
            per block.
        cross_attention_caches: each block's `cross_attention_cache` of
            the encoder's output.
        cache_update_index: int or scalar tensor.
        encoder_padding_mask: `(batch, source_len)`, or `None` where every
            encoder position is real (Whisper's audio frames).
        pin: optional `pin(number, x, cache) -> (x, cache)` applied after
            each block (layouts while sharded).

    Returns:
        `(the last block's output, updated self-attention caches)`.
    """
    updated = []
    for number, (block, cache, cross) in enumerate(
        zip(blocks, self_attention_caches, cross_attention_caches, strict=True)
    ):
        x, cache = block(
            x,
            encoder_padding_mask=encoder_padding_mask,
            self_attention_cache=cache,
            self_attention_cache_update_index=cache_update_index,
            cross_attention_cache=cross,
        )
        if pin is not None:
            x, cache = pin(number, x, cache)
        updated.append(cache)
    return x, updated


def seq2seq_block_rules():
    """Layout rules of `seq2seq_blocks`: heads on the model axis (hidden
    where they don't divide it) in both stacks and the cross-attention,
    the feed-forward width on the model axis."""
    return [
        *encoder_block_rules(ENCODER_BLOCK),
        *attention_rules(
            DECODER_BLOCK + "(self_attention|cross_attention)/",
            use_bias=True,
            hidden_if_heads_indivisible=True,
        ),
        *feedforward_rules(DECODER_BLOCK, gated=False),
    ]
