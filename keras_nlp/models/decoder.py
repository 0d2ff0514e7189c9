"""The decoder-only stacks the backbones share.

`init_decoder_graph` wires token ids through an embedding, the blocks and a
final norm into the backbone's functional graph. Family builders (see
`keras_nlp/models/families/`) build the layers of a whole family from its
differences and then call it.

`DecoderStack` keeps those parts so that a causal LM can also run them one
by one, with a key/value cache (`keras_nlp.models.CausalLM`).
"""

import inspect

import keras

from keras_nlp.models.functional import init_functional


class DecoderStack:
    """The embedding, blocks and final norm of a decoder backbone.

    The functional graph runs them in one call without a cache; cached
    decoding (`CausalLM.call_with_cache`) runs them itself, passing each
    block its cache, the cache index and the tokens' positions. A plain
    object, not a layer: the backbone already tracks the layers.

    Args:
        embed: callable mapping token ids to the first hidden states; it
            may take a `positions` keyword (learned absolute positions).
        blocks: the decoder blocks, each taking `padding_mask`, `cache`,
            `cache_update_index` and `positions`.
        final_norm: callable applied to the last block's output.

    Attributes:
        embed_takes_positions: whether `embed` reads positions (a table
            of learned positions).
    """

    def __init__(self, embed, blocks, final_norm):
        self.blocks = list(blocks)
        self.final_norm = final_norm
        self._embed = embed
        call = embed.call if isinstance(embed, keras.layers.Layer) else embed
        self.embed_takes_positions = (
            "positions" in inspect.signature(call).parameters
        )

    def embed(self, token_ids, positions=None):
        """The first hidden states of `token_ids` at `positions`."""
        if positions is None or not self.embed_takes_positions:
            # Rotary and ALiBi models take positions in the attention.
            return self._embed(token_ids)
        return self._embed(token_ids, positions=positions)


def init_decoder_graph(backbone, embed, blocks, final_norm, **kwargs):
    """Wires and initializes the functional model of a decoder stack.

    `token_ids` -> `embed` -> each block (given the padding mask) ->
    `final_norm`, with inputs `{"token_ids", "padding_mask"}`, and keeps
    those parts as `backbone.decoder_stack` (a `DecoderStack`). A
    backbone's `__init__` calls this instead of `super().__init__(inputs=...,
    outputs=...)`.

    Args:
        backbone: the backbone being constructed.
        embed: callable mapping the symbolic `token_ids` to the first
            hidden states (a layer, or a function of layers).
        blocks: the decoder blocks, each called as
            `block(x, padding_mask=padding_mask)`.
        final_norm: the layer applied to the last block's output.
        **kwargs: forwarded to `keras.Model.__init__` (`dtype`, `name`).
    """
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    padding_mask = keras.Input(
        shape=(None,), dtype="int32", name="padding_mask"
    )
    backbone.decoder_stack = DecoderStack(embed, blocks, final_norm)
    x = embed(token_ids)
    for block in blocks:
        x = block(x, padding_mask=padding_mask)
    init_functional(
        backbone,
        inputs={"token_ids": token_ids, "padding_mask": padding_mask},
        outputs=final_norm(x),
        **kwargs,
    )
