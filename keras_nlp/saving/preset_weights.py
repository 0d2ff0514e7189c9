"""Backbone weights in the Keras `.weights.h5` layout, read into shards.

Files are laid out as Keras's `save_weights` lays them out: one group per
layer, keyed by Python attribute names and class names
(`layers/gemma_decoder_block/attention/query_dense/vars/0`), whose `vars`
group carries the layer's `name`. Large backbones are split over
`model_NNNNN.weights.h5` files listed in `model.weights.json`.

Reading does not depend on those keys, which differ between libraries that
name their Python classes differently: the `name`s along a group's ancestors
spell the layer's path (`decoder_block_0/attention/query`), which is the
prefix of `variable.path`. So a file written by keras-hub for the same
architecture loads into ours, and every weight is checked before any is
assigned.
"""

import json
import os
import re

import h5py
import keras
import numpy as np
from keras.src.saving import saving_lib
from keras.src.saving.keras_saveable import KerasSaveable
from keras.src.utils import naming

from keras_nlp import multihost
from keras_nlp.distribution.layout_map import active_layout_map
from keras_nlp.distribution.layout_map import verify_layouts
from keras_nlp.saving.preset_config import SHARDED_WEIGHTS_FILE
from keras_nlp.saving.preset_config import WEIGHTS_FILE
from keras_nlp.saving.preset_config import PresetError
from keras_nlp.saving.preset_config import read_json

_SHARD_FILE = re.compile(r"model_\d{5}\.weights\.h5")
_LORA_VARIABLES = ("lora_kernel_a", "lora_kernel_b")
_MAX_LISTED = 8


def _join(path, name):
    return f"{path}/{name}" if path else name


# === The Keras layout: which group each layer's variables go in ===


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
            _walk(child, _join(path, attr), visited, found)
        elif isinstance(child, (list, dict, tuple)):
            _walk_container(child, _join(path, attr), visited, found, set())


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
            _walk(item, _join(path, name), visited, found)
        elif isinstance(item, (list, dict, tuple)):
            name = saving_lib._get_unique_name("container", used)
            _walk_container(
                item, _join(path, name), visited, found, seen_containers
            )


def saved_groups(model):
    """`(group path, saveable)` pairs of `model` in Keras's saving order."""
    found = []
    _walk(model, "", set(), found)
    return found


def _own_variables(layer):
    """The variables a layer saves, in its saving order (no adapters)."""
    own = list(layer._trainable_variables) + list(
        layer._non_trainable_variables
    )
    return [v for v in own if v.name not in _LORA_VARIABLES]


# === Writing ===


def _dtype_name(value):
    return keras.backend.standardize_dtype(value.dtype)


class _ShardedWriter:
    """Writes datasets into files of at most `max_bytes` each."""

    def __init__(self, preset_dir, max_bytes, active=True):
        # Inactive writers (processes other than 0) only take part in the
        # gathers and write nothing.
        self.active = active
        self.preset_dir = preset_dir
        self.max_bytes = max_bytes
        self.sharded = max_bytes is not None
        self.files = []
        self.filenames = []
        self.current_bytes = 0
        self.total_bytes = 0
        self.weight_map = {}
        self._open_new()

    def _open_new(self):
        if not self.active:
            return
        if self.sharded:
            name = f"model_{len(self.files):05d}.weights.h5"
        else:
            name = WEIGHTS_FILE
        if self.files:
            self.files[-1].close()
        self.files.append(h5py.File(os.path.join(self.preset_dir, name), "w"))
        self.filenames.append(name)
        self.current_bytes = 0

    @property
    def current(self):
        return self.files[-1]

    def group(self, path, name):
        vars_path = _join(path, "vars")
        if not self.active:
            return vars_path
        group = self.current.require_group(vars_path)
        group.attrs["name"] = name
        return vars_path

    def write(self, vars_path, key, value):
        if not self.active:
            return
        size = value.nbytes
        if (
            self.sharded
            and self.current_bytes
            and self.current_bytes + size > self.max_bytes
        ):
            self._open_new()
        group = self.current.require_group(vars_path)
        if _dtype_name(value) == "bfloat16":
            dataset = group.create_dataset(key, data=value)
            dataset.attrs["dtype"] = "bfloat16"
        else:
            group.create_dataset(key, data=value)
        self.current_bytes += size
        self.total_bytes += size
        filename = self.filenames[-1]
        entry = self.weight_map.setdefault(f"/{vars_path}", filename)
        if entry != filename:
            names = entry if isinstance(entry, list) else [entry]
            if filename not in names:
                names.append(filename)
            self.weight_map[f"/{vars_path}"] = names

    def close(self):
        if not self.active:
            return
        self.current.close()
        if self.sharded:
            index = {
                "metadata": {"total_size": self.total_bytes},
                "weight_map": self.weight_map,
            }
            path = os.path.join(self.preset_dir, SHARDED_WEIGHTS_FILE)
            with open(path, "w") as file:
                json.dump(index, file, indent=4)


def _remove_old_weights(preset_dir):
    for name in os.listdir(preset_dir):
        if name in (WEIGHTS_FILE, SHARDED_WEIGHTS_FILE) or _SHARD_FILE.match(
            name
        ):
            os.remove(os.path.join(preset_dir, name))


def weights_nbytes(model):
    """Bytes the saved weights of `model` take (LoRA adapters excluded)."""
    return sum(
        int(np.prod(v.shape)) * np.dtype(_numpy_dtype(v.dtype)).itemsize
        for v in model.weights
        if v.name not in _LORA_VARIABLES
    )


def _numpy_dtype(dtype):
    dtype = keras.backend.standardize_dtype(dtype)
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(dtype)


def write_weights(model, preset_dir, max_shard_size=None):
    """Writes the weights of `model` into `preset_dir`, one tensor at a time.

    Sharded variables are gathered one at a time, so the host holds at most
    one whole tensor besides the model. In a JAX cluster every process must
    call this (the gathers are collective) and only process 0 writes. LoRA
    adapters are merged into their kernels, as Keras's `save_weights` does.

    Args:
        model: a built `keras.Model`.
        preset_dir: an existing directory.
        max_shard_size: float or None. Above this many GB of weights, they
            are split into `model_NNNNN.weights.h5` files of at most this
            size each, listed in `model.weights.json`.

    Returns:
        The list of files written.
    """
    total = weights_nbytes(model)
    max_bytes = None
    if max_shard_size is not None and total > max_shard_size * 1024**3:
        max_bytes = max_shard_size * 1024**3
    active = multihost.is_main_process()
    if active:
        _remove_old_weights(preset_dir)
    writer = _ShardedWriter(preset_dir, max_bytes, active=active)
    try:
        for path, saveable in saved_groups(model):
            name = getattr(saveable, "name", None)
            if not isinstance(name, str):
                continue
            vars_path = writer.group(path, name)
            if not hasattr(saveable, "save_own_variables"):
                continue
            slots = {}
            saveable.save_own_variables(slots)
            for key, value in slots.items():
                writer.write(vars_path, key, multihost.gather(value))
    finally:
        writer.close()
    written = list(writer.filenames)
    if writer.sharded:
        written.append(SHARDED_WEIGHTS_FILE)
    return written


# === Reading ===


class _Entry:
    """One dataset of a weights file: where it is, its shape and dtype."""

    def __init__(self, filename, dataset):
        self.filename = filename
        self.key = dataset.name.lstrip("/")
        self.shape = tuple(int(d) for d in dataset.shape)
        if dataset.attrs.get("dtype") == "bfloat16":
            self.dtype = "bfloat16"
        else:
            self.dtype = keras.backend.standardize_dtype(dataset.dtype)

    def describe(self):
        return f"{self.filename}:{self.key}"


def _is_training_state(owner):
    # Keras's `save_weights` of a compiled model also writes its optimizer;
    # a preset's weights are the layers' only.
    return owner.split("/", 1)[0] == "optimizer"


class WeightsFile:
    """The datasets of a preset's weights, keyed by layer path and slot.

    Args:
        preset_dir: a directory holding `model.weights.h5`, or
            `model.weights.json` and the files it lists.

    Raises:
        PresetError: no weights, an unreadable (e.g. truncated) file, or a
            file whose layers cannot be told apart by name.
    """

    def __init__(self, preset_dir):
        self.preset_dir = preset_dir
        index_path = os.path.join(preset_dir, SHARDED_WEIGHTS_FILE)
        if os.path.isfile(index_path):
            filenames = self._shard_filenames(index_path)
        elif os.path.isfile(os.path.join(preset_dir, WEIGHTS_FILE)):
            filenames = [WEIGHTS_FILE]
        else:
            raise PresetError(
                f"The preset {preset_dir} has no weights: neither "
                f"{WEIGHTS_FILE} nor {SHARDED_WEIGHTS_FILE} exists. Pass "
                "load_weights=False to build it with random weights."
            )
        self.files = {}
        try:
            for filename in filenames:
                self.files[filename] = self._open(filename)
            self.entries = self._index()
        except BaseException:
            self.close()
            raise

    def _shard_filenames(self, index_path):
        index = read_json(index_path, SHARDED_WEIGHTS_FILE)
        weight_map = (
            index.get("weight_map") if isinstance(index, dict) else None
        )
        if not isinstance(weight_map, dict):
            raise PresetError(
                f"{index_path} must hold an object with a 'weight_map' of "
                "h5 group -> file name(s)."
            )
        names = []
        for value in weight_map.values():
            for name in value if isinstance(value, list) else [value]:
                if not isinstance(name, str) or os.path.basename(name) != name:
                    raise PresetError(
                        f"{index_path} lists {name!r}; weight files must be "
                        "plain file names inside the preset directory."
                    )
                if name not in names:
                    names.append(name)
        return names

    def _open(self, filename):
        path = os.path.join(self.preset_dir, filename)
        if not os.path.isfile(path):
            raise PresetError(
                f"The preset's weights are incomplete: {path} does not exist"
                + (
                    f" (listed in {SHARDED_WEIGHTS_FILE})."
                    if filename != WEIGHTS_FILE
                    else "."
                )
            )
        try:
            return h5py.File(path, "r")
        except OSError as error:
            raise PresetError(
                f"{path} cannot be read as an HDF5 weights file (truncated "
                f"or corrupt?): {error}."
            ) from error

    def _index(self):
        names = {}
        datasets = {}

        for filename, h5 in self.files.items():

            def visit(key, item, filename=filename):
                owner, _, slot = key.rpartition("/vars/")
                is_vars = key == "vars" or key.endswith("/vars")
                if isinstance(item, h5py.Group) and is_vars:
                    name = item.attrs.get("name")
                    owner_path = key[: -len("vars")].rstrip("/")
                    if isinstance(name, bytes):
                        name = name.decode()
                    if isinstance(name, str):
                        names[owner_path] = name
                elif (
                    isinstance(item, h5py.Dataset)
                    and slot.isdigit()
                    and not _is_training_state(owner)
                ):
                    datasets[(owner, int(slot))] = _Entry(filename, item)

            try:
                h5.visititems(visit)
            except (OSError, RuntimeError) as error:
                raise PresetError(
                    f"{h5.filename} cannot be read (truncated or corrupt?): "
                    f"{error}."
                ) from error

        entries = {}
        for (owner, slot), entry in datasets.items():
            layer_path = self._layer_path(owner, names)
            if (layer_path, slot) in entries:
                other = entries[(layer_path, slot)]
                raise PresetError(
                    f"Two weights of the preset have the same layer path "
                    f"{layer_path!r}: {other.describe()} and "
                    f"{entry.describe()}."
                )
            entries[(layer_path, slot)] = entry
        return entries

    @staticmethod
    def _layer_path(owner, names):
        parts = owner.split("/")
        chain = []
        for end in range(1, len(parts) + 1):
            name = names.get("/".join(parts[:end]))
            if name is not None:
                chain.append(name)
        return "/".join(chain)

    def read(self, entry, index=()):
        """Reads `entry` (or the `index` slices of it) as a numpy array."""
        dataset = self.files[entry.filename][entry.key]
        try:
            value = dataset[index] if index else dataset[()]
        except (OSError, RuntimeError, ValueError) as error:
            raise PresetError(
                f"Reading {entry.describe()} failed (truncated or corrupt "
                f"file?): {error}."
            ) from error
        value = np.asarray(value)
        if entry.dtype == "bfloat16":
            value = value.view(_numpy_dtype("bfloat16"))
        return value

    def close(self):
        for h5 in self.files.values():
            h5.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def _layer_path(layer, variables):
    prefixes = {v.path.rpartition("/")[0] for v in variables}
    if len(prefixes) != 1:
        raise PresetError(
            f"Layer {layer.name!r} has variables under several paths "
            f"({sorted(prefixes)}); its weights cannot be located in a file."
        )
    return prefixes.pop()


def _targets(model):
    """`(layer path, slot) -> variable` for every variable `model` saves."""
    targets = {}
    seen = set()
    for layer in model._flatten_layers(include_self=True, recursive=True):
        variables = [v for v in _own_variables(layer) if id(v) not in seen]
        if not variables:
            continue
        seen.update(id(v) for v in variables)
        path = _layer_path(layer, variables)
        for slot, variable in enumerate(variables):
            targets[(path, slot)] = variable
    return targets


def _castable(source, target):
    def is_float(dtype):
        return dtype == "bfloat16" or np.issubdtype(
            np.dtype(dtype), np.floating
        )

    if is_float(target):
        return is_float(source)
    return source == target


def _listing(problems):
    shown = "\n".join(f"  - {p}" for p in problems[:_MAX_LISTED])
    more = len(problems) - _MAX_LISTED
    return shown + (f"\n  - ... and {more} more" if more > 0 else "")


def _auto_name_free(layer_path):
    # Auto-generated layer names get a process-dependent `_N` suffix, so
    # `moe_block_1` in a file may be `moe_block` here.
    return tuple(re.sub(r"_\d+$", "", part) for part in layer_path.split("/"))


def _natural_key(text):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _pair_renamed(targets, entries):
    """Pairs the weights left unmatched by layer path, if auto names differ.

    Within each group of equal path-without-auto-suffixes and slot, targets
    (model order) and entries (file order) pair up in order when their
    counts are equal.
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
        for (target_key, _), (entry_key, entry) in zip(
            group_targets, group_entries, strict=True
        ):
            pairs[target_key] = (entry_key, entry)
    return pairs


def check_weights(model, weights):
    """Pairs every variable of `model` with its dataset, or raises.

    Returns:
        A list of `(variable, entry)` in the model's order.

    Raises:
        PresetError listing every missing, extra, mis-shaped or
        mis-typed weight (with its file and variable).
    """
    targets = _targets(model)
    unmatched_entries = {
        key: entry
        for key, entry in weights.entries.items()
        if key not in targets
    }
    renamed = _pair_renamed(
        {k: v for k, v in targets.items() if k not in weights.entries},
        unmatched_entries,
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
        elif not _castable(entry.dtype, _dtype_name(variable)):
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
            f"{_listing(problems)}"
        )
    return pairs


def _device_value(weights, entry, variable):
    """A variable's value read from the file, placed as its layout says.

    On JAX each device's slice is read on its own, straight into that
    device's buffer (the previous slice is kept, so replicated dimensions
    are read once); on other backends the tensor is read whole.
    """
    dtype = _numpy_dtype(variable.dtype)
    if keras.backend.backend() != "jax":
        return weights.read(entry).astype(dtype, copy=False)
    import jax
    from keras.distribution import TensorLayout

    variable._initialize_layout()
    sharding = variable._layout
    if isinstance(sharding, TensorLayout):
        sharding = sharding.backend_layout
    if sharding is None:
        sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    last = {}

    def read_slice(index):
        key = tuple((s.start, s.stop, s.step) for s in index)
        if last.get("key") != key:
            last.clear()
            last["key"] = key
            last["value"] = weights.read(entry, index).astype(dtype, copy=False)
        return last["value"]

    return jax.make_array_from_callback(
        tuple(variable.shape), sharding, read_slice
    )


def _with_progress(pairs, preset_dir, verbose):
    if not verbose:
        return pairs
    from rich.progress import track

    return track(pairs, description=f"Loading {preset_dir}")


def _forget_deferred(model):
    """Drops `model`'s variables from Keras's list of ones to initialize."""
    from keras.src.backend.common import global_state

    pending = global_state.get_global_attribute("uninitialized_variables")
    if pending:
        ours = {id(v) for v in model.variables}
        pending[:] = [v for v in pending if id(v) not in ours]


def build_from_preset_weights(backbone_cls, config, preset_dir, verbose=False):
    """Builds a backbone whose variables are created from a preset's weights.

    The backbone is built with deferred variables (nothing is allocated),
    its weights are checked against the files, and each variable is then
    created from its tensor, slice by slice on its devices under the
    active layout. No random initialization happens and the host never
    holds more than one tensor besides the model.

    Args:
        backbone_cls: the backbone class (its `from_config` takes
            `verify_layout=False` to defer the check of its layout until
            its variables have values).
        config: dict of constructor arguments.
        preset_dir: the preset directory.
        verbose: bool, show a progress bar.

    Returns:
        The backbone, verified against its layout plan when sharded.

    Raises:
        PresetError: see `WeightsFile` and `check_weights`.
    """
    with WeightsFile(preset_dir) as weights:
        with keras.StatelessScope(initialize_variables=False):
            model = backbone_cls.from_config(config, verify_layout=False)
        try:
            pairs = check_weights(model, weights)
            for variable, entry in _with_progress(pairs, preset_dir, verbose):
                variable._initialize(_device_value(weights, entry, variable))
                variable._initializer = None
            # Variables no file holds (e.g. random seed states) start as
            # their initializers say.
            for variable in model.variables:
                if variable._value is None:
                    variable._deferred_initialize()
        finally:
            _forget_deferred(model)
    layout_map = active_layout_map()
    if model.layout_plan is not None and layout_map is not None:
        verify_layouts(model, model.layout_plan, layout_map.device_mesh)
    return model


def load_weights(model, preset_dir, verbose=False):
    """Loads a preset's weights into an already built `model`.

    Every weight is checked before any is assigned; on JAX each variable's
    new value is read slice by slice into the devices that hold it.

    Args:
        model: the built backbone.
        preset_dir: the preset directory.
        verbose: bool, show a progress bar.

    Raises:
        PresetError: see `WeightsFile` and `check_weights`.
    """
    with WeightsFile(preset_dir) as weights:
        pairs = check_weights(model, weights)
        for variable, entry in _with_progress(pairs, preset_dir, verbose):
            variable.assign(_device_value(weights, entry, variable))
