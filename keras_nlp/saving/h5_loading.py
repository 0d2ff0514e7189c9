"""Loading `.weights.h5` presets into a backbone, straight into its shards.

Each variable is paired with its dataset by layer path and slot, the path
being the prefix of `variable.path` and, in the file, the names along its
group's ancestors (`h5_layout`), so a file written by keras-hub for the
same architecture loads into ours. Every weight is checked (shape, dtype)
before any value is read, and values are read slice by slice into the
devices that hold them (`weight_transfer.device_value`).
"""

import collections
import math
import re

import numpy as np

from keras_nlp.saving.h5_layout import own_variables
from keras_nlp.saving.h5_layout import saved_names
from keras_nlp.saving.h5_reader import WeightsFile
from keras_nlp.saving.preset_files import PresetError
from keras_nlp.saving.weight_transfer import build_from_weights
from keras_nlp.saving.weight_transfer import castable
from keras_nlp.saving.weight_transfer import check_finite
from keras_nlp.saving.weight_transfer import device_value
from keras_nlp.saving.weight_transfer import dtype_name
from keras_nlp.saving.weight_transfer import is_float
from keras_nlp.saving.weight_transfer import listing
from keras_nlp.saving.weight_transfer import numpy_dtype
from keras_nlp.saving.weight_transfer import warn_lossy
from keras_nlp.saving.weight_transfer import with_progress

# === Pairing variables with datasets ===


def _variables_prefix(layer, variables):
    prefixes = {v.path.rpartition("/")[0] for v in variables}
    if len(prefixes) != 1:
        raise PresetError(
            f"Layer {layer.name!r} has variables under several paths "
            f"({sorted(prefixes)}); its weights cannot be located in a file."
        )
    return prefixes.pop()


def _targets(model):
    """`(layer path, slot) -> variable` for every variable `model` saves,
    and `(layer path, slot) -> its dataset key in a file Keras writes`.

    A layer's path is the prefix of its variables' paths. Where layers
    share one (keras-hub's T5 makes the encoder's and the decoder's
    relative attention biases outside their blocks' name scopes: both are
    `self_attention/embeddings`), each takes its names path instead, as a
    weights file records it (`transformer_encoder_layer_0/self_attention`).
    """
    owners = []
    seen = set()
    for layer in model._flatten_layers(include_self=True, recursive=True):
        variables = [v for v in own_variables(layer) if id(v) not in seen]
        if not variables:
            continue
        seen.update(id(v) for v in variables)
        owners.append((layer, _variables_prefix(layer, variables), variables))
    shared = collections.Counter(path for _, path, _ in owners)
    saved = saved_names(model)
    targets = {}
    keys = {}
    for layer, path, variables in owners:
        names_path, group = saved.get(id(layer), (path, path))
        if shared[path] > 1:
            path = names_path
        for slot, variable in enumerate(variables):
            targets[(path, slot)] = variable
            keys[(path, slot)] = f"{group}/vars/{slot}"
    return targets, keys


def _auto_name_free(layer_path):
    # Auto-generated layer names get a process-dependent `_N` suffix, so
    # `moe_block_1` in a file may be `moe_block` here.
    return tuple(re.sub(r"_\d+$", "", part) for part in layer_path.split("/"))


def _natural_key(text):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _pair_renamed(targets, entries, target_keys):
    """Pairs the weights left unmatched by layer path, if auto names differ.

    Within each group of equal path-without-auto-suffixes and slot, targets
    and entries pair up in the order of their dataset keys (`target_keys`:
    where Keras would save each target) when their counts are equal. Keys
    name attributes, so sibling norms auto-named in one order and sorted
    in another (T5's `self_attention_layer_norm` and `layer_norm`) pair up
    by role.
    """
    groups = {}
    for key, variable in targets.items():
        group = groups.setdefault((_auto_name_free(key[0]), key[1]), [[], []])
        group[0].append((key, variable))
    for key, entry in entries.items():
        group = groups.setdefault((_auto_name_free(key[0]), key[1]), [[], []])
        group[1].append((key, entry))
    pairs = {}
    for group_targets, group_entries in groups.values():
        if len(group_targets) != len(group_entries):
            continue
        group_entries.sort(key=lambda item: _natural_key(item[1].key))
        group_targets.sort(key=lambda item: _natural_key(target_keys[item[0]]))
        for (target_key, _), (entry_key, entry) in zip(
            group_targets, group_entries, strict=True
        ):
            pairs[target_key] = (entry_key, entry)
    return pairs


def check_weights(model, weights):
    """Pairs every variable of `model` with its dataset, or raises.

    Args:
        model: the built backbone (its variables may be deferred).
        weights: an open `WeightsFile`.

    Returns:
        A list of `(variable, entry)` in the model's order.

    Raises:
        PresetError listing every missing, extra, mis-shaped or
        mis-typed weight (with its file and variable).
    """
    targets, target_keys = _targets(model)
    unmatched_entries = {
        key: entry
        for key, entry in weights.entries.items()
        if key not in targets
    }
    renamed = _pair_renamed(
        {k: v for k, v in targets.items() if k not in weights.entries},
        unmatched_entries,
        target_keys,
    )
    problems = []
    pairs = []
    for key, variable in targets.items():
        entry = weights.entries.get(key)
        if entry is None and key in renamed:
            entry_key, entry = renamed[key]
            unmatched_entries.pop(entry_key)
        expected = f"shape {tuple(variable.shape)}, dtype {variable.dtype}"
        if entry is None:
            problems.append(
                f"{variable.path}: not in the preset's weights "
                f"(expected {expected})"
            )
        elif entry.shape != tuple(variable.shape):
            problems.append(
                f"{variable.path}: {entry.describe()} has shape "
                f"{entry.shape}, expected {tuple(variable.shape)}"
            )
        elif not castable(entry.dtype, dtype_name(variable)):
            problems.append(
                f"{variable.path}: {entry.describe()} has dtype "
                f"{entry.dtype}, expected {variable.dtype} (or another "
                "floating dtype)"
            )
        else:
            pairs.append((variable, entry))
    for key in sorted(unmatched_entries):
        entry = unmatched_entries[key]
        problems.append(
            f"{entry.describe()} (layer path {key[0]!r}, slot {key[1]}, "
            f"shape {entry.shape}): the model has no such weight"
        )
    if problems:
        raise PresetError(
            f"The weights in {weights.preset_dir} do not match the "
            f"{type(model).__name__} built from its config "
            f"({len(problems)} problem(s); nothing was loaded):\n"
            f"{listing(problems)}"
        )
    return pairs


# === Reading values ===


def _read_checked(weights, entry, variable, index=(), allow_nonfinite=False):
    """Reads `entry` (or its `index` slices) in `variable`'s dtype, checked."""
    value = weights.read(entry, index)
    with np.errstate(over="ignore"):
        value = value.astype(numpy_dtype(variable.dtype), copy=False)
    if not allow_nonfinite:
        check_finite(value, variable, entry)
    return value


def _scan_values(weights, entry, variable, block_bytes=64 * 1024**2):
    """Checks that `entry` is finite in `variable`'s dtype, block by block."""
    if not is_float(numpy_dtype(variable.dtype)):
        return
    if not entry.shape:
        _read_checked(weights, entry, variable)
        return
    # At most `block_bytes` of float64 per block.
    rows = max(1, block_bytes // max(math.prod(entry.shape[1:]) * 8, 1))
    for start in range(0, entry.shape[0], rows):
        index = (slice(start, min(start + rows, entry.shape[0])),)
        _read_checked(weights, entry, variable, index)


def _device_value(weights, entry, variable, allow_nonfinite=False):
    """A variable's value read from an h5 preset (see `device_value`);
    every slice is cast to the variable's dtype and, unless
    `allow_nonfinite`, checked for NaN and Inf."""
    return device_value(
        variable,
        lambda index: _read_checked(
            weights, entry, variable, index, allow_nonfinite
        ),
    )


def build_from_preset_weights(
    backbone_cls, config, preset_dir, verbose=False, allow_nonfinite=False
):
    """Builds a backbone whose variables are created from a preset's weights.

    The backbone is built with deferred variables (nothing is allocated),
    its weights are checked against the files (shapes and dtypes, before
    any value is read), and each variable is then created from its
    tensor, slice by slice on its devices under the active layout. No
    random initialization happens and the host never holds more than one
    tensor besides the model. A weight holding NaN or Inf is an error
    unless `allow_nonfinite`; one loaded into a narrower float dtype is
    rounded, with a `LossyConversionWarning` naming it.

    Args:
        backbone_cls: the backbone class (its `from_config` takes
            `verify_layout=False` to defer the check of its layout until
            its variables have values).
        config: dict of constructor arguments.
        preset_dir: the preset directory (a path or an open
            `PresetDirectory`).
        verbose: bool, show a progress bar.
        allow_nonfinite: bool, load NaN and Inf values instead of raising.

    Returns:
        The backbone, verified against its layout plan when sharded.

    Raises:
        PresetError: see `WeightsFile` and `check_weights`, and NaN or Inf
            values.
    """
    with WeightsFile(preset_dir) as weights:
        return build_from_weights(
            backbone_cls,
            config,
            weights.preset_dir,
            pair=lambda model: check_weights(model, weights),
            read=lambda variable, entry: _device_value(
                weights, entry, variable, allow_nonfinite
            ),
            verbose=verbose,
        )


def load_weights(model, preset_dir, verbose=False, allow_nonfinite=False):
    """Loads a preset's weights into an already built `model`.

    Every weight is checked before any is assigned: shapes and dtypes
    first, then (unless `allow_nonfinite`) every value for NaN and Inf,
    block by block, so a bad file leaves `model` as it was. On JAX each
    variable's new value is then read slice by slice into the devices that
    hold it.

    Args:
        model: the built backbone.
        preset_dir: the preset directory (a path or an open
            `PresetDirectory`).
        verbose: bool, show a progress bar.
        allow_nonfinite: bool, load NaN and Inf values instead of raising.

    Raises:
        PresetError: see `WeightsFile` and `check_weights`, and NaN or Inf
            values.
    """
    with WeightsFile(preset_dir) as weights:
        pairs = check_weights(model, weights)
        warn_lossy(pairs, weights.preset_dir, stacklevel=2)
        if not allow_nonfinite:
            for variable, entry in pairs:
                _scan_values(weights, entry, variable)
        progress = with_progress(pairs, weights.preset_dir, verbose)
        for variable, entry in progress:
            variable.assign(
                _device_value(weights, entry, variable, allow_nonfinite=True)
            )
