"""Initializing a backbone's functional graph, for the shared stacks."""

import keras

from keras_nlp.models.backbone import Backbone


def init_functional(backbone, inputs, outputs, **kwargs):
    """`keras.Model.__init__(inputs, outputs)` for a backbone under way.

    A backbone's stack builder calls this instead of `super().__init__`.

    Args:
        backbone: the backbone being constructed.
        inputs: dict of name -> `keras.Input`.
        outputs: the output tensor or dict of tensors.
        **kwargs: forwarded to `keras.Model.__init__` (`dtype`, `name`).
    """
    dtype = kwargs.pop("dtype", None)
    # Through Backbone's MRO: Keras swaps `Functional` into it on the first
    # functional build, and must not do so twice.
    super(Backbone, backbone).__init__(inputs=inputs, outputs=outputs, **kwargs)
    # Functional models drop `dtype`; the backbone's own policy is what
    # `get_config` (and so a saved preset) records.
    if dtype is not None:
        backbone.dtype_policy = keras.dtype_policies.get(dtype)
