"""Variable paths and shapes of a model, found without allocating weights."""

import dataclasses
import math
import threading

import keras

from keras_nlp.distribution.activations import describe_layers
from keras_nlp.distribution.dims import declared_dims
from keras_nlp.distribution.dims import declared_flat_heads
from keras_nlp.distribution.kv_cache import describe_caches
from keras_nlp.distribution.quantizable import describe_quantizable

# How many abstract builds this thread is inside (they nest: a backbone
# built abstractly may plan another).
_abstract_builds = threading.local()


def in_abstract_build():
    """Whether this thread is building a model abstractly (see
    `abstract_build`): its variables are never allocated."""
    return getattr(_abstract_builds, "depth", 0) > 0


@dataclasses.dataclass(frozen=True)
class VariableInfo:
    """The path, shape and dtype of one model variable.

    `dim_names` are the names its layer declares for its dimensions (see
    `keras_nlp.distribution.dims`), or `None` if the layer declares none;
    `flat_heads` has, per dimension, the `(count, size)` runs of the heads
    a flat dimension holds (see `declare_flat_heads`) or `None`, and is
    `None` when no dimension is flat.
    """

    path: str
    shape: tuple
    dtype: str
    trainable: bool
    dim_names: tuple = None
    flat_heads: tuple = None

    @property
    def size(self):
        return math.prod(self.shape)


def abstract_variables(build_model):
    """The `VariableInfo`s of `abstract_build(build_model)`."""
    return abstract_build(build_model)[0]


def abstract_build(build_model):
    """Builds a model abstractly and lists its variables.

    Variables are created in a Keras `StatelessScope` that defers their
    initialization, and are never initialized: a 7B-parameter model costs a
    few MB, and no initializer is even traced (on JAX, building under
    `jax.eval_shape` traced every one and took twice as long).

    Args:
        build_model: a callable taking no arguments and returning a
            `keras.Model` (or layer).

    Returns:
        `(variables, layers)`: a tuple of `VariableInfo` in the model's
        `weights` order, and what else a plan may lay out: the
        `LayerOutput`s of its activations (see
        `keras_nlp.distribution.activations`), the `AttentionCache`s of
        its key/value caches (see `keras_nlp.distribution.kv_cache`), then
        the `QuantizableLayer`s that `quantize` would change (see
        `keras_nlp.distribution.quantizable`).
    """
    found = []
    layers = []

    def build_and_record():
        model = build_model()
        dims = declared_dims(model)
        flat_heads = declared_flat_heads(model)
        found.extend(
            VariableInfo(
                path=variable.path,
                shape=tuple(int(d) for d in variable.shape),
                dtype=str(variable.dtype),
                trainable=bool(variable.trainable),
                dim_names=dims.get(variable.path),
                flat_heads=flat_heads.get(variable.path),
            )
            for variable in model.weights
        )
        layers.extend(describe_layers(model))
        layers.extend(describe_caches(model))
        layers.extend(describe_quantizable(model))

    from keras.src.backend.common import global_state

    key = "uninitialized_variables"
    before = list(global_state.get_global_attribute(key, []) or [])
    _abstract_builds.depth = getattr(_abstract_builds, "depth", 0) + 1
    try:
        with keras.StatelessScope(initialize_variables=False):
            build_and_record()
    finally:
        _abstract_builds.depth -= 1
        # Variables created here are deferred when a stateless scope is
        # active (a loader's): forget them, or the next scope to exit
        # would allocate the whole abstract model.
        global_state.set_global_attribute(key, before)
    return tuple(found), tuple(layers)
