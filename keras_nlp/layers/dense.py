"""A dense projection that names its dimensions, for every backbone.

Keras's `Dense` (over the last axis), with the kernel's (and bias's)
dimension names declared so layout rules are checked against it. A `Dense`
rather than an `EinsumDense` over `"...a,ab->...b"`: Keras 3.15 cannot
quantize an `EinsumDense` whose equation starts with an ellipsis to int8 or
int4 (it passes the input's rank where it needs its shape), and both create
the same `kernel` `(input width, width)` and `bias` `(width,)`.
"""

import keras

from keras_nlp.distribution.dims import declare_dims


def fresh_initializer(initializer):
    """A copy of a Keras initializer, for one more variable.

    An unseeded Keras initializer fixes its seed when created and then
    draws the same values on every call: each kernel needs its own copy.
    """
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())


def named_dense(
    width,
    dims,
    *,
    name,
    use_bias=True,
    activation=None,
    kernel_initializer="glorot_uniform",
    bias_initializer="zeros",
    dtype=None,
):
    """A `Dense` from the last axis to `width`, dimensions declared.

    The kernel is `(input width, width)`, named `dims`; the bias, if any,
    `(width,)`, named `dims[1:]`. Inputs may have any leading dimensions.

    Args:
        width: int. Output width.
        dims: `(input name, output name)`, e.g. `("hidden", "ffw")`.
        name: the layer name (the variables' path segment).
        use_bias: bool.
        activation: optional activation (name or callable).
        kernel_initializer, bias_initializer: Keras initializers; each is
            copied, so two layers never share draws.
        dtype: dtype or `keras.DTypePolicy`.

    Returns:
        A `keras.layers.Dense`.

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers.dense import named_dense

    dense = named_dense(64, ("hidden", "ffw"), name="intermediate")
    dense(np.zeros((2, 5, 16), "float32")).shape  # (2, 5, 64)
    dense.kernel.shape  # (16, 64)
    ```
    """
    dense = keras.layers.Dense(
        width,
        use_bias=use_bias,
        activation=activation,
        kernel_initializer=fresh_initializer(kernel_initializer),
        bias_initializer=fresh_initializer(bias_initializer),
        dtype=dtype,
        name=name,
    )
    declared = {"kernel": tuple(dims)}
    if use_bias:
        declared["bias"] = tuple(dims[1:])
    return declare_dims(dense, **declared)
