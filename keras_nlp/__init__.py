"""keras_nlp: Keras 3 NLP backbones whose model parallelism just works.

Every backbone plans its own sharding from real shapes: see
`Backbone.get_layout_map`, `Backbone.plan_layout` and `keras_nlp.distribution`.
"""

from keras_nlp import distribution, layers, models
from keras_nlp.version import __version__

__all__ = ["distribution", "layers", "models", "__version__"]
