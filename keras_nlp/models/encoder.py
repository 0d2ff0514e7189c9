"""The functional graph the encoder backbones share.

`init_encoder_graph` wires token ids (and segment ids, and the padding
mask) through an embedding, the blocks and an optional pooler into the
backbone's functional graph. `keras_nlp.models.families.bert` builds the
layers of the BERT-like encoders from their differences and then calls it.
"""

import keras

from keras_nlp.models.functional import init_functional


def init_encoder_graph(
    backbone,
    embed,
    blocks,
    *,
    pooler=None,
    segment_ids=True,
    padding_mask=True,
    block_kwargs=None,
    **kwargs,
):
    """Wires and initializes the functional model of an encoder stack.

    Inputs are `token_ids`, then `segment_ids` and `padding_mask` when
    asked for. `embed(token_ids, segment_ids)` gives the first hidden
    states; each block is called as `block(x, padding_mask=padding_mask)`
    (or `block(x)` without a mask). With a `pooler`, the outputs are
    `{"sequence_output", "pooled_output"}`, the pooler applied to the first
    (`[CLS]`) token; without one, the sequence output alone.

    Args:
        backbone: the backbone being constructed.
        embed: callable `(token_ids, segment_ids or None) -> hidden`.
        blocks: the blocks, in call order (a shared block may repeat).
        pooler: optional layer mapping `(batch, hidden)` to the pooled
            output.
        segment_ids: bool. Take a `segment_ids` input.
        padding_mask: bool. Take a `padding_mask` input.
        block_kwargs: optional callable `hidden -> dict`, called once on
            the embedded hidden states: extra keyword arguments passed to
            every block call (DeBERTa's relative-position table).
        **kwargs: forwarded to `keras.Model.__init__` (`dtype`, `name`).
    """
    inputs = {
        "token_ids": keras.Input(shape=(None,), dtype="int32", name="token_ids")
    }
    if segment_ids:
        inputs["segment_ids"] = keras.Input(
            shape=(None,), dtype="int32", name="segment_ids"
        )
    if padding_mask:
        inputs["padding_mask"] = keras.Input(
            shape=(None,), dtype="int32", name="padding_mask"
        )
    x = embed(inputs["token_ids"], inputs.get("segment_ids"))
    extra = block_kwargs(x) if block_kwargs else {}
    for block in blocks:
        if padding_mask:
            x = block(x, padding_mask=inputs["padding_mask"], **extra)
        else:
            x = block(x, **extra)
    outputs = x
    if pooler is not None:
        outputs = {"sequence_output": x, "pooled_output": pooler(x[:, 0, :])}
    init_functional(backbone, inputs=inputs, outputs=outputs, **kwargs)
