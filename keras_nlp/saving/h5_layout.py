"""Keras's `.weights.h5` layout: which group holds each layer's variables.

Files are laid out as Keras's `save_weights` lays them out: one group per
layer, keyed by Python attribute names and class names
(`layers/gemma_decoder_block/attention/query_dense/vars/0`), whose `vars`
group carries the layer's `name`. Large backbones are split over
`model_NNNNN.weights.h5` files listed in `model.weights.json`
(`h5_writer`).

Reading does not depend on those keys, which differ between libraries that
name their Python classes differently: the `name`s along a group's ancestors
spell the layer's path (`decoder_block_0/attention/query`), which is the
prefix of `variable.path` (`names_path`). So a file written by keras-hub for
the same architecture loads into ours (`h5_reader`, `h5_loading`).
"""

import keras
from keras.src.saving import saving_lib
from keras.src.saving.keras_saveable import KerasSaveable
from keras.src.utils import naming

from keras_nlp.distribution.lora_adapters import LORA_ADAPTERS
from keras_nlp.distribution.quantizable import stored_variable


def join_group(path, name):
    """The group `name` inside the group `path` (`""` is the root)."""
    return f"{path}/{name}" if path else name


def _walk(saveable, path, visited, found):
    """Lists `(group path, layer)` in the order Keras saves them.

    Only layers: a compiled model's optimizer (and any other training
    state) is not part of a preset.
    """
    if id(saveable) in visited or not isinstance(saveable, keras.Layer):
        return
    visited.add(id(saveable))
    found.append((path, saveable))
    for attr, child in saving_lib._walk_saveable(saveable):
        if isinstance(child, KerasSaveable):
            _walk(child, join_group(path, attr), visited, found)
        elif isinstance(child, (list, dict, tuple)):
            _walk_container(
                child, join_group(path, attr), visited, found, set()
            )


def _walk_container(container, path, visited, found, seen_containers):
    if id(container) in seen_containers:
        return
    seen_containers.add(id(container))
    used = {}
    items = container.values() if isinstance(container, dict) else container
    for item in items:
        if isinstance(item, KerasSaveable):
            # Keras keys list entries by class name, not by layer name.
            name = saving_lib._get_unique_name(
                naming.to_snake_case(type(item).__name__), used
            )
            _walk(item, join_group(path, name), visited, found)
        elif isinstance(item, (list, dict, tuple)):
            name = saving_lib._get_unique_name("container", used)
            _walk_container(
                item, join_group(path, name), visited, found, seen_containers
            )


def saved_groups(model):
    """`(group path, saveable)` pairs of `model` in Keras's saving order."""
    found = []
    _walk(model, "", set(), found)
    return found


def own_variables(layer):
    """The variables a layer saves, in its saving order (no adapters).

    A quantized layer saves in the order Keras lists for its mode
    (`variable_serialization_spec`: kernel, bias, scale, ...), which
    differs from the order it created them in.
    """
    mode = getattr(layer, "quantization_mode", None)
    spec = getattr(layer, "variable_serialization_spec", None) if mode else None
    if spec and mode in spec:
        found = (stored_variable(layer, name) for name in spec[mode])
        return [v for v in found if v is not None]
    own = list(layer._trainable_variables) + list(
        layer._non_trainable_variables
    )
    return [v for v in own if v.name not in LORA_ADAPTERS]


def names_path(group, names):
    """The names path of the layer saved in `group`.

    Args:
        group: str, the layer's group path (`layers/t5_block/layer_norm`).
        names: dict, group path -> the name recorded for that group.

    Returns:
        The names of the group and of its ancestors that have one, joined
        by `/` (`transformer_encoder_layer_0/layer_norm`).
    """
    parts = group.split("/")
    chain = []
    for end in range(1, len(parts) + 1):
        name = names.get("/".join(parts[:end]))
        # A nested functional model (its layers saved under `layers/`)
        # names no variable path: its layers were built by calls outside
        # its scope (keras-hub's `PaliGemmaVit`).
        nested_model = end < len(parts) and parts[end] == "layers"
        if name is not None and not nested_model:
            chain.append(name)
    return "/".join(chain)


def saved_names(model):
    """`id(layer) -> (names path, group path)` as a weights file records them.

    The names path joins the names of the layer and of its ancestors in
    the saving tree (what `WeightsFile` reads back); the group path is
    where Keras's layout puts the layer (`layers/t5_block/layer_norm`).
    """
    groups = saved_groups(model)
    names = {path: layer.name for path, layer in groups}
    return {
        id(layer): (names_path(path, names), path) for path, layer in groups
    }
