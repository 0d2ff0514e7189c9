"""keras_nlp: Keras 3 NLP backbones whose model parallelism just works.

Every backbone plans its own sharding from real shapes: see
`Backbone.get_layout_map`, `Backbone.plan_layout` and `keras_nlp.distribution`.
"""

import importlib

from keras_nlp.version import __version__

_SUBMODULES = (
    "distribution",
    "layers",
    "models",
    "multihost",
    "saving",
    "tokenizers",
)


def __getattr__(name):
    # Submodules load on first use, so `python -m keras_nlp` can choose the
    # Keras backend before Keras is imported.
    if name in _SUBMODULES:
        return importlib.import_module(f"keras_nlp.{name}")
    raise AttributeError(f"module 'keras_nlp' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_SUBMODULES])


__all__ = [
    "distribution",
    "layers",
    "models",
    "multihost",
    "saving",
    "tokenizers",
    "__version__",
]
