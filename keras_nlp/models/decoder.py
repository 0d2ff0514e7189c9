"""The decoder-only stacks the backbones share.

`init_decoder_graph` wires token ids through an embedding, the blocks and a
final norm into the backbone's functional graph. Family builders (see
`keras_nlp/models/families/`) build the layers of a whole family from its
differences and then call it.
"""

import keras

from keras_nlp.models.functional import init_functional


def init_decoder_graph(backbone, embed, blocks, final_norm, **kwargs):
    """Wires and initializes the functional model of a decoder stack.

    `token_ids` -> `embed` -> each block (given the padding mask) ->
    `final_norm`, with inputs `{"token_ids", "padding_mask"}`. A backbone's
    `__init__` calls this instead of `super().__init__(inputs=...,
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
    x = embed(token_ids)
    for block in blocks:
        x = block(x, padding_mask=padding_mask)
    init_functional(
        backbone,
        inputs={"token_ids": token_ids, "padding_mask": padding_mask},
        outputs=final_norm(x),
        **kwargs,
    )
