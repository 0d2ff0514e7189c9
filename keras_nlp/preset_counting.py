"""Parameter counts of the built-in presets, without building them.

`count_preset_parameters` counts a config from two small abstract builds;
`preset_parameter_count` reads the stored table
(`keras_nlp.preset_parameter_counts`) where the config still has the
stored digest. After adding or changing a preset, write the table again:

    python -m keras_nlp.preset_counting
"""

import hashlib
import json


def count_preset_parameters(backbone_cls, config):
    """A config's parameter count from two small abstract builds.

    The blocks of one config are alike, so one- and two-block builds give
    the count at any depth (ALBERT's shared blocks add none). Only the
    variables' shapes are read: nothing is planned or allocated.
    """
    from keras_nlp.distribution.backbone_planner import backbone_variables

    def count(num_layers):
        config_at_depth = {**config, "num_layers": num_layers}
        variables = backbone_variables(backbone_cls, config_at_depth)
        return sum(variable.size for variable in variables)

    layers = config["num_layers"]
    try:
        one = count(1)
        two = count(2) if layers > 1 else one
    except ValueError:  # a depth the config forbids (ALBERT's groups)
        return count(layers)
    return one + (layers - 1) * (two - one)


def config_digest(config):
    """A short digest of a config: a stored count holds for this one only."""
    text = json.dumps(config, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


# Counts made in this process, by class and config.
_COUNTED = {}


def preset_parameter_count(backbone_cls, preset, config):
    """A built-in preset's parameter count.

    Read from `keras_nlp.preset_parameter_counts` when stored for this
    very config; otherwise counted (two abstract builds) and kept for the
    rest of the process.
    """
    from keras_nlp.preset_parameter_counts import COUNTS

    stored = COUNTS.get(backbone_cls.__name__, {}).get(preset)
    if stored is not None and stored[1] == config_digest(config):
        return stored[0]
    key = (backbone_cls, json.dumps(config, sort_keys=True, default=repr))
    if key not in _COUNTED:
        _COUNTED[key] = count_preset_parameters(backbone_cls, config)
    return _COUNTED[key]


def built_in_presets():
    """`(class, {preset: config})` of each class with presets, by name."""
    from keras_nlp.models import Backbone
    from keras_nlp.saving.registry import registered_backbones

    for _, backbone_cls in sorted(registered_backbones(Backbone).items()):
        presets = backbone_cls.__dict__.get("presets", {})
        if presets:
            yield backbone_cls, presets


def write_preset_parameter_counts(path):
    """Counts every built-in preset and writes the table `--list` reads.

    Args:
        path: the file to rewrite, `keras_nlp/preset_parameter_counts.py`:
            its `COUNTS = {...}` is replaced, the rest kept.
    """
    lines = []
    for backbone_cls, presets in built_in_presets():
        lines.append(f'    "{backbone_cls.__name__}": {{')
        for preset, config in presets.items():
            count = count_preset_parameters(backbone_cls, config)
            digest = config_digest(config)
            lines.append(f'        "{preset}": ({count:_}, "{digest}"),')
        lines.append("    },")
    with open(path, encoding="utf-8") as file:
        text = file.read()
    head = text[: text.index("COUNTS = {") + len("COUNTS = {")]
    tail = text[text.index("\n}\n", len(head)) :]
    with open(path, "w", encoding="utf-8") as file:
        file.write(head + "\n" + "\n".join(lines) + tail)


if __name__ == "__main__":
    import os

    os.environ.setdefault("KERAS_BACKEND", "jax")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from keras_nlp import preset_parameter_counts

    write_preset_parameter_counts(preset_parameter_counts.__file__)
