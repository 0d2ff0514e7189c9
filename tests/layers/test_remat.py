"""Blocks rematerialized under Keras's `RematScope`."""

import jax
import keras
import numpy as np
import pytest

from keras_nlp.layers.remat import RematBlock
from keras_nlp.models import GPT2Backbone
from keras_nlp.models import GPT2CausalLM

CONFIG = dict(
    vocabulary_size=64,
    num_layers=2,
    num_heads=2,
    hidden_dim=16,
    intermediate_dim=32,
    max_sequence_length=16,
    dropout=0.0,
)
INPUTS = {
    "token_ids": np.arange(16, dtype="int32").reshape(2, 8) % 64,
    "padding_mask": np.ones((2, 8), "int32"),
}


def build(mode=None, **changes):
    keras.utils.set_random_seed(0)
    config = dict(CONFIG, **changes)
    if mode is None:
        return GPT2Backbone(**config)
    with keras.RematScope(
        mode=mode,
        layer_names=["transformer_layer_1"],
        output_size_threshold=100,
    ):
        return GPT2Backbone(**config)


def loss_and_grads(backbone):
    """Loss and gradients through `stateless_call`, as `fit` computes them."""
    trainable = [v.value for v in backbone.trainable_variables]
    fixed = [v.value for v in backbone.non_trainable_variables]

    def loss(values):
        hidden, _ = backbone.stateless_call(values, fixed, INPUTS)
        return jax.numpy.mean(hidden**2)

    return jax.value_and_grad(loss)(trainable), jax.make_jaxpr(loss)(trainable)


def remat_calls(jaxpr):
    """How many checkpointed calls a traced program makes (nested ones too)."""
    count = 0
    for equation in jaxpr.jaxpr.eqns:
        if equation.primitive.name in ("checkpoint", "remat", "remat2"):
            count += 1
        for value in equation.params.values():
            if hasattr(value, "jaxpr") and hasattr(value.jaxpr, "eqns"):
                count += remat_calls(value)
    return count


@pytest.mark.parametrize(
    "mode, blocks", [("full", 2), ("list_of_layers", 1), ("larger_than", 2)]
)
def test_blocks_are_the_rematerialized_unit(mode, blocks):
    (plain_loss, plain_grads), plain_program = loss_and_grads(build())
    backbone = build(mode)
    (loss, grads), program = loss_and_grads(backbone)
    # One checkpoint per chosen block, none around the model or the
    # layers outside (or inside) the blocks.
    assert remat_calls(plain_program) == 0
    assert remat_calls(program) == blocks
    blocks = [
        layer
        for layer in backbone._flatten_layers()
        if isinstance(layer, RematBlock)
    ]
    inside = {id(x) for b in blocks for x in b._flatten_layers()}
    outside = [
        layer.name
        for layer in backbone._flatten_layers()
        if id(layer) not in inside and layer._remat_mode is not None
    ]
    assert outside == [backbone.name]
    np.testing.assert_allclose(loss, plain_loss, rtol=1e-6)
    for got, want in zip(grads, plain_grads, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_fit_with_dropout_under_full_remat():
    # Keras alone traces `training` into the checkpoint, and dropout's
    # `if training` then fails; a block keeps it a Python bool.
    backbone = build("full", dropout=0.1)
    causal_lm = GPT2CausalLM(backbone)
    history = causal_lm.fit(INPUTS, epochs=2, verbose=0)
    losses = history.history["loss"]
    assert len(losses) == 2 and all(np.isfinite(losses))
