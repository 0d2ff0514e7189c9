"""LoRA adapter files in keras-hub's `.lora.h5` format.

keras-hub's `save_lora_weights` writes one HDF5 file:

    lora/vars/rank                    the adapters' rank
    lora/<index>/vars/lora_kernel_a   one group per adapted layer, where
    lora/<index>/vars/lora_kernel_b   <index> counts the model's layers that
                                      have weights, in Keras's flattening
                                      order

The index depends only on the layer structure, which ours shares with
keras-hub's class of the same name (checked by the tests), so files go both
ways. Adapters are small (rank x width): they are gathered whole to be
written, and assigned whole to be loaded, which places each one on its
devices as its layout says.
"""

import os
import tempfile

import h5py
import numpy as np

from keras_nlp import multihost
from keras_nlp.distribution.lora_adapters import LORA_ADAPTERS

SUFFIX = ".lora.h5"


class LoraFileError(ValueError):
    """A LoRA weights file cannot be written or read as asked."""


def indexed_lora_layers(model):
    """`{index: layer}` of the adapted layers, with keras-hub's indices."""
    with_weights = [
        layer
        for layer in model._flatten_layers(include_self=False)
        if layer.weights
    ]
    return {
        index: layer
        for index, layer in enumerate(with_weights)
        if getattr(layer, "lora_enabled", False)
    }


def save_lora_weights(model, filepath):
    """Writes `model`'s adapters to `filepath` (see the module docstring).

    The file is written beside its target and renamed into place, so a
    failure leaves any earlier file as it was. With several processes,
    every process takes part in gathering and process 0 writes.
    """
    filepath = os.fspath(filepath)
    layers = indexed_lora_layers(model)
    if not layers:
        raise LoraFileError(
            f"This {type(model).__name__} has no LoRA adapters to save; "
            "call enable_lora(rank) first."
        )
    if not filepath.endswith(SUFFIX):
        raise LoraFileError(
            f"A LoRA weights file name must end in '{SUFFIX}', as keras-hub "
            f"reads them. Received: filepath={filepath!r}."
        )
    directory = os.path.dirname(os.path.abspath(filepath))
    if not os.path.isdir(directory):
        raise LoraFileError(
            f"Cannot write {filepath!r}: the directory {directory!r} does "
            "not exist."
        )
    values = multihost.gather(
        {
            index: [getattr(layer, name) for name in LORA_ADAPTERS]
            for index, layer in layers.items()
        }
    )
    if multihost.is_main_process():
        descriptor, staging = tempfile.mkstemp(
            suffix=SUFFIX, prefix=".staging-", dir=directory
        )
        os.close(descriptor)
        try:
            with h5py.File(staging, "w") as file:
                file.create_group("lora/vars")["rank"] = model._lora_rank
                for index, adapters in values.items():
                    group = file.create_group(f"lora/{index}/vars")
                    for name, value in zip(
                        LORA_ADAPTERS, adapters, strict=True
                    ):
                        group[name] = value
            os.replace(staging, filepath)
        except BaseException:
            if os.path.exists(staging):
                os.remove(staging)
            raise
    multihost.barrier("keras_nlp.save_lora_weights")


def _read_file(filepath):
    """`(rank, {index: {name: array}})` from a `.lora.h5` file."""
    if not os.path.isfile(filepath):
        raise LoraFileError(f"No LoRA weights file at {filepath!r}.")
    try:
        file = h5py.File(filepath, "r")
    except OSError as error:
        raise LoraFileError(
            f"{filepath!r} is not an HDF5 file ({error}); LoRA weights are "
            "written by save_lora_weights."
        ) from None
    with file:
        lora = file.get("lora")
        if not isinstance(lora, h5py.Group) or "vars/rank" not in lora:
            raise LoraFileError(
                f"{filepath!r} is not a LoRA weights file: it has no "
                "'lora/vars/rank'. LoRA weights are written by "
                "save_lora_weights."
            )
        rank = int(np.asarray(lora["vars/rank"]))
        adapters = {}
        for key in lora:
            if key == "vars":
                continue
            group = lora.get(f"{key}/vars")
            if not key.isdigit() or not isinstance(group, h5py.Group):
                raise LoraFileError(
                    f"{filepath!r}: unexpected entry 'lora/{key}'; a LoRA "
                    "weights file holds 'lora/<layer index>/vars'."
                )
            missing = [name for name in LORA_ADAPTERS if name not in group]
            if missing:
                raise LoraFileError(
                    f"{filepath!r}: 'lora/{key}/vars' lacks {missing}."
                )
            adapters[int(key)] = {
                name: np.asarray(group[name]) for name in LORA_ADAPTERS
            }
    return rank, adapters


def load_lora_weights(model, filepath):
    """Reads adapters written by `save_lora_weights` (ours or keras-hub's).

    Enables LoRA at the file's rank (with the default target layers) if
    the model has no adapters yet. Every adapter's layer and shape are
    checked before any value is assigned.
    """
    filepath = os.fspath(filepath)
    rank, adapters = _read_file(filepath)
    current = getattr(model, "_lora_rank", None)
    if current and current != rank:
        raise LoraFileError(
            f"{filepath!r} holds rank-{rank} adapters, but this "
            f"{type(model).__name__} has LoRA enabled at rank {current}. "
            "Both ranks must match."
        )
    if not current:
        model.enable_lora(rank)
    layers = indexed_lora_layers(model)
    if set(adapters) != set(layers):
        names = {index: layer.name for index, layer in layers.items()}
        raise LoraFileError(
            f"{filepath!r} holds adapters for layer indices "
            f"{sorted(adapters)}, but this {type(model).__name__}'s adapted "
            f"layers are at {sorted(layers)} ({names}). Was it saved from "
            "another class or config, or other target layers?"
        )
    for index, layer in layers.items():
        for name in LORA_ADAPTERS:
            expected = tuple(getattr(layer, name).shape)
            found = adapters[index][name].shape
            if found != expected:
                raise LoraFileError(
                    f"{filepath!r}: lora/{index} ({layer.name}) {name} has "
                    f"shape {found}; this model's is {expected}."
                )
    for index, layer in layers.items():
        for name in LORA_ADAPTERS:
            variable = getattr(layer, name)
            variable.assign(adapters[index][name].astype(variable.dtype))


def check_no_quantized_lora(model, action):
    """Raises when `model` has LoRA adapters on int8 or int4 kernels
    (QLoRA), which `action` would have to fold into them."""
    quantized = [
        layer.path
        for layer in model._flatten_layers(include_self=False)
        if getattr(layer, "lora_enabled", False)
        and getattr(layer, "quantization_mode", None) in ("int8", "int4")
    ]
    if quantized:
        raise ValueError(
            f"{action} cannot fold LoRA adapters into the quantized kernels "
            f"of {', '.join(quantized)}: each sum must be quantized again. "
            "Save the adapters (save_lora_weights), load them into the "
            "float backbone (load_lora_weights), merge_lora() there, then "
            "quantize the merged copy."
        )
