"""Base class for every backbone in keras_nlp (skeleton; layout API follows)."""

import keras


class Backbone(keras.Model):
    """Base class of all backbones: a functional `keras.Model`.

    Subclasses build their layers in `__init__`, wire a functional graph and
    call `super().__init__(inputs=..., outputs=..., dtype=dtype, **kwargs)`,
    then store their constructor arguments and return them from
    `get_config()`.
    """

    presets = {}

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)
