"""The backbone classes that presets may build, by class name.

`keras_nlp.models.Backbone` registers every subclass here when the class is
defined, so reading a preset never imports model code by name: a
`config.json` can only build a class that is already registered.
"""

_BACKBONES = {}


def register_backbone(cls):
    """Registers a backbone class under its class name; returns it."""
    _BACKBONES[cls.__name__] = cls
    return cls


def registered_backbones(base=None):
    """`{name: class}` of the registered classes (subclasses of `base`)."""
    return {
        name: cls
        for name, cls in _BACKBONES.items()
        if base is None or issubclass(cls, base)
    }
