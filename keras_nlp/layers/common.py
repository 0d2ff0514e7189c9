"""What several layers share: the feed-forward kernels' dimension names,
activations by name, the plain feed-forward's projections, checks of
their arguments, and `from_config` for layers built from other layers."""

import keras

from keras_nlp.layers.dense import named_dense

# Feed-forward kernels: inputs (gate, intermediate) and output.
FEEDFORWARD_INPUT_DIMS = ("hidden", "ffw")
FEEDFORWARD_OUTPUT_DIMS = ("ffw", "hidden")


def get_activation(name):
    """A Keras activation by name; `"gelu_approximate"` is tanh-GELU."""
    if name == "gelu_approximate":
        return lambda x: keras.activations.gelu(x, approximate=True)
    return keras.activations.get(name)


def feedforward_denses(
    hidden_dim, intermediate_dim, activation, names, **options
):
    """A plain feed-forward's `(intermediate, output)` projections.

    Args:
        hidden_dim: int. The output width.
        intermediate_dim: int. The intermediate width.
        activation: str. The intermediate activation, by a name that
            `get_activation` knows.
        names: `(intermediate name, output name)`, the layers' names.
        **options: for both `named_dense`s (initializers, `dtype`).
    """
    intermediate, output = names
    return (
        named_dense(
            intermediate_dim,
            FEEDFORWARD_INPUT_DIMS,
            activation=get_activation(activation),
            name=intermediate,
            **options,
        ),
        named_dense(
            hidden_dim, FEEDFORWARD_OUTPUT_DIMS, name=output, **options
        ),
    )


class TakesLayers:
    """Mixin: `from_config` for a layer whose constructor takes layers.

    `get_config` writes each such argument with
    `keras.saving.serialize_keras_object`; `from_config` reads back the
    arguments named in `layer_arguments` (those present and not `None`)
    before calling the constructor. List it before `keras.layers.Layer`.
    """

    layer_arguments = ()

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in cls.layer_arguments:
            if config.get(key) is not None:
                config[key] = keras.saving.deserialize_keras_object(config[key])
        return cls(**config)


def check_sublayer_keys(sublayer_names, defaults):
    """Raises a `ValueError` naming `sublayer_names` keys that are not
    keys of `defaults` (a layer's default sublayer names)."""
    unknown = set(sublayer_names or {}) - set(defaults)
    if unknown:
        raise ValueError(
            f"Unknown `sublayer_names` keys {sorted(unknown)}; valid "
            f"keys are {sorted(defaults)}."
        )


def check_positive_ints(**sizes):
    """Raises a `ValueError` naming the first of `sizes` (`name=value`)
    that is not a positive integer (a bool is not one)."""
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(
                f"`{name}` must be a positive integer. Received: "
                f"{name}={value!r}."
            )


def check_rates(**rates):
    """Raises a `ValueError` naming the first of `rates` (`name=value`)
    that is not in `[0, 1)`."""
    for name, value in rates.items():
        if not 0 <= value < 1:
            raise ValueError(
                f"`{name}` must be in [0, 1). Received: {name}={value!r}."
            )
