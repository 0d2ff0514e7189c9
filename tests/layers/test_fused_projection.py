"""`project_together`: one matmul (and one all-reduce back) for q/k/v."""

import jax
import keras
import numpy as np
import pytest

from benchmarks.collectives import collective_stats
from keras_nlp.layers.fused_projection import project_together
from tests.models.backbone_checks import make_mesh

multi_device = pytest.mark.multi_device
HIDDEN = 64


def _projections():
    """A q, k, v of 8 heads (q heads-first, as Gemma's) and a plain Dense."""
    layers = [
        keras.layers.EinsumDense(
            "btd,ndh->btnh", (None, 8, 16), name="query", bias_axes="nh"
        ),
        keras.layers.EinsumDense("btd,dnh->btnh", (None, 8, 16), name="key"),
        keras.layers.EinsumDense("btd,dnh->btnh", (None, 8, 16), name="value"),
    ]
    for layer in layers:
        layer.build((None, None, HIDDEN))
    rng = np.random.default_rng(0)
    for layer in layers:
        for variable in layer.weights:
            variable.assign(rng.normal(size=variable.shape).astype("float32"))
    return layers


def _distribution(layouts):
    mesh = make_mesh((1, 8))
    layout_map = keras.distribution.LayoutMap(mesh)
    for key, spec in layouts.items():
        layout_map[key] = spec
    return keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch"
    )


HEADS_ON_MODEL = {
    "query/kernel": ("model", None, None),
    "query/bias": ("model", None),
    "key/kernel": (None, "model", None),
    "value/kernel": (None, "model", None),
}


def _loss_and_input_gradient(distribution, fused):
    with distribution.scope():
        layers = _projections()
    variables = [v for layer in layers for v in layer.weights]

    def loss(values, x):
        mapping = list(zip(variables, values, strict=True))
        with distribution.scope(), keras.StatelessScope(state_mapping=mapping):
            if fused:
                outputs = project_together(x, layers)
            else:
                outputs = [layer(x) for layer in layers]
        return sum(jax.numpy.sum(jax.numpy.tanh(o)) for o in outputs)

    # The weights are arguments, sharded as their layouts say.
    values = [v.value for v in variables]
    x = np.random.default_rng(1).normal(size=(2, 4, HIDDEN)).astype("float32")
    step = jax.jit(jax.value_and_grad(loss, argnums=1))
    value, gradient = step(values, x)
    return (
        float(value),
        np.asarray(gradient),
        collective_stats(step.lower(values, x).compile().as_text()),
    )


@multi_device
def test_fused_equals_separate_with_one_all_reduce_backward():
    distribution = _distribution(HEADS_ON_MODEL)
    fused = _loss_and_input_gradient(distribution, fused=True)
    separate = _loss_and_input_gradient(distribution, fused=False)
    np.testing.assert_allclose(fused[0], separate[0], rtol=1e-5)
    np.testing.assert_allclose(fused[1], separate[1], rtol=1e-4, atol=1e-4)
    # The input gradient's three partial sums are reduced once, not thrice.
    fused_ar, separate_ar = fused[2]["all-reduce"], separate[2]["all-reduce"]
    activation_bytes = 2 * 4 * HIDDEN * 4
    # (Besides the input gradient, the loss's three scalar sums.)
    assert activation_bytes <= fused_ar.bytes < activation_bytes + 64
    assert 3 * activation_bytes <= separate_ar.bytes < 3 * activation_bytes + 64


@multi_device
def test_differently_sharded_kernels_run_one_by_one():
    # A replicated key (one key/value head in the real model) cannot join.
    layouts = dict(HEADS_ON_MODEL, **{"key/kernel": (None, None, None)})
    distribution = _distribution(layouts)
    with distribution.scope():
        layers = _projections()
        x = np.ones((2, 4, HIDDEN), "float32")
        outputs = project_together(x, layers)
        expected = [layer(x) for layer in layers]
    for output, reference in zip(outputs, expected, strict=True):
        np.testing.assert_allclose(
            np.asarray(output), np.asarray(reference), rtol=1e-5, atol=1e-5
        )


def test_without_a_distribution_the_layers_are_called():
    layers = _projections()
    calls = []
    for layer in layers:
        layer.call = (
            lambda original: (
                lambda *a, **k: (calls.append(1), original(*a, **k))[1]
            )
        )(layer.call)
    outputs = project_together(np.ones((2, 3, HIDDEN), "float32"), layers)
    assert len(calls) == 3
    assert [tuple(o.shape) for o in outputs] == [(2, 3, 8, 16)] * 3
