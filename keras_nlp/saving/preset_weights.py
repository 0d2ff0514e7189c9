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

import collections
import contextlib
import math
import os
import re
import warnings

import h5py
import keras
import numpy as np
from keras.src.saving import saving_lib
from keras.src.saving.keras_saveable import KerasSaveable
from keras.src.utils import naming

from keras_nlp import multihost
from keras_nlp.distribution.layout_map import active_layout_map
from keras_nlp.distribution.layout_map import verify_layouts
from keras_nlp.saving.preset_files import SHARD_FILE
from keras_nlp.saving.preset_files import SHARDED_WEIGHTS_FILE
from keras_nlp.saving.preset_files import WEIGHTS_FILE
from keras_nlp.saving.preset_files import PresetError
from keras_nlp.saving.preset_files import check_file_name
from keras_nlp.saving.preset_files import open_preset_directory
from keras_nlp.saving.preset_files import write_json

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


def dtype_name(value):
    return keras.backend.standardize_dtype(value.dtype)


def _host_copy(array):
    """`array` (one device's JAX array) as NumPy, cached nowhere.

    `numpy.asarray` keeps the host copy of a jax.Array on the array itself
    for as long as the array lives: for a model's variables, a second copy
    of the model after `save_to_preset` returns. The copy is made here and
    the cache dropped, so it is freed with the caller's reference.
    """
    cached = getattr(array, "_npy_value", None)
    value = np.asarray(array)
    if cached is None and getattr(array, "_npy_value", None) is not None:
        array._npy_value = None
    return value


def host_pieces(value, active=True):
    """Yields `(index, numpy piece)` covering `value` once, piece by piece.

    A JAX array whose shards this process holds is yielded shard by shard
    (each distinct shard once), so the host never holds the whole tensor;
    one spanning other processes is gathered whole (a collective: every
    process takes part, and only an `active` one keeps the result).
    Other backends' tensors come whole.
    """
    if isinstance(value, keras.Variable):
        value = value.value
    if keras.backend.backend() == "jax":
        import jax

        if isinstance(value, jax.Array):
            if not value.is_fully_addressable:
                whole = multihost.gather(value)
                if active:
                    yield (), whole
                return
            if not active:
                return
            for shard in value.addressable_shards:
                if shard.replica_id == 0:
                    yield shard.index, _host_copy(shard.data)
            return
    if active:
        yield (), np.asarray(keras.ops.convert_to_numpy(value))


class _ShardedWriter:
    """Writes datasets into files of at most `max_bytes` each.

    Files are created exclusively (never through a link, never over an
    existing file), and OSErrors name the file being written.
    """

    def __init__(self, preset_dir, max_bytes, active=True):
        # Inactive writers (processes other than 0) only take part in the
        # gathers and write nothing.
        self.active = active
        self.preset_dir = os.fspath(preset_dir) if active else None
        self.max_bytes = max_bytes
        self.sharded = max_bytes is not None
        self.files = []
        self.filenames = []
        self.current_bytes = 0
        self.total_bytes = 0
        self.weight_map = {}
        self._open_new()

    def _path(self):
        return os.path.join(self.preset_dir, self.filenames[-1])

    def _open_new(self):
        if not self.active:
            return
        if self.sharded:
            name = f"model_{len(self.files):05d}.weights.h5"
        else:
            name = WEIGHTS_FILE
        if self.files:
            self._close_current()
        self.filenames.append(name)
        try:
            # "w-" creates with O_EXCL: a link at the name is never followed.
            self.files.append(h5py.File(self._path(), "w-"))
        except OSError as error:
            raise _with_path(error, self._path()) from error
        self.current_bytes = 0

    def _close_current(self):
        try:
            self.files[-1].close()
        except OSError as error:
            raise _with_path(error, self._path()) from error

    @property
    def current(self):
        return self.files[-1]

    def group(self, path, name):
        vars_path = _join(path, "vars")
        if not self.active:
            return vars_path
        try:
            group = self.current.require_group(vars_path)
            group.attrs["name"] = name
        except OSError as error:
            raise _with_path(error, self._path()) from error
        return vars_path

    def write(self, vars_path, key, value):
        """Writes `value` piece by piece; see `host_pieces`."""
        shape = tuple(int(d) for d in value.shape)
        dtype = numpy_dtype(value.dtype)
        if not self.active:
            for _ in host_pieces(value, active=False):
                pass
            return
        size = math.prod(shape) * np.dtype(dtype).itemsize
        if (
            self.sharded
            and self.current_bytes
            and self.current_bytes + size > self.max_bytes
        ):
            self._open_new()
        try:
            group = self.current.require_group(vars_path)
            dataset = group.create_dataset(key, shape=shape, dtype=dtype)
            if np.dtype(dtype) == np.dtype(numpy_dtype("bfloat16")):
                dataset.attrs["dtype"] = "bfloat16"
            for index, piece in host_pieces(value):
                dataset[index] = piece
                del piece
        except OSError as error:
            raise _with_path(error, self._path()) from error
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
        self._close_current()
        if self.sharded:
            index = {
                "metadata": {"total_size": self.total_bytes},
                "weight_map": self.weight_map,
            }
            write_json(self.preset_dir, SHARDED_WEIGHTS_FILE, index)

    def abort(self):
        """Closes every file without raising (after an error)."""
        for h5 in self.files:
            with contextlib.suppress(Exception):
                h5.close()


def _with_path(error, path):
    """`error` as an OSError of the same kind that names `path`."""
    if getattr(error, "filename", None):
        return error
    reason = error.strerror or str(error)
    if error.errno:
        return OSError(error.errno, reason, path)
    new = OSError(f"{reason} (writing {path})")
    new.filename = path
    return new


def _remove_old_weights(preset_dir):
    # `os.remove` of a link removes the link, not what it points to.
    for name in os.listdir(preset_dir):
        if name in (WEIGHTS_FILE, SHARDED_WEIGHTS_FILE) or SHARD_FILE.fullmatch(
            name
        ):
            os.remove(os.path.join(preset_dir, name))


def weights_nbytes(model):
    """Bytes the saved weights of `model` take (LoRA adapters excluded)."""
    return sum(
        int(np.prod(v.shape)) * np.dtype(numpy_dtype(v.dtype)).itemsize
        for v in model.weights
        if v.name not in _LORA_VARIABLES
    )


def numpy_dtype(dtype):
    dtype = keras.backend.standardize_dtype(dtype)
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(dtype)


def write_weights(model, preset_dir, max_shard_size=None):
    """Writes the weights of `model` into `preset_dir`, piece by piece.

    Each variable is written shard by shard as its devices hold it (a
    tensor spanning other processes is gathered whole first), and no host
    copy outlives its write, so besides the model the host holds at most
    one tensor, and nothing once this returns. In a JAX cluster every
    process must call this (the gathers are collective) and only process 0
    writes. LoRA adapters are merged into their kernels, as Keras's
    `save_weights` does. `save_to_preset` calls this on a fresh directory
    that it swaps in only when complete; called directly, it replaces the
    weight files in `preset_dir` (removing links, never writing through
    them).

    Args:
        model: a built `keras.Model`.
        preset_dir: an existing directory.
        max_shard_size: float or None. Above this many GB of weights, they
            are split into `model_NNNNN.weights.h5` files of at most this
            size each, listed in `model.weights.json`.

    Returns:
        The list of files written.

    Raises:
        OSError: a file could not be written; the message names it.
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
            # One value at a time: a merged LoRA kernel is a new tensor,
            # freed before the next is made.
            for key in list(slots):
                writer.write(vars_path, key, slots.pop(key))
    except BaseException:
        writer.abort()
        raise
    writer.close()
    written = list(writer.filenames)
    if writer.sharded:
        written.append(SHARDED_WEIGHTS_FILE)
    return written


# === Reading ===


def _small_string_attr(obj, key):
    """The string attribute `key` of an h5 object, or None.

    Only a scalar string is read, so an attribute crafted to be huge is
    never loaded.
    """
    if key not in obj.attrs:
        return None
    attr = h5py.h5a.open(obj.id, key.encode())
    if attr.shape not in ((), None) or attr.dtype.kind not in "SOU":
        return None
    value = obj.attrs[key]
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


class _Entry:
    """One dataset of a weights file: where it is, its shape and dtype.

    Raises:
        PresetError: the dataset's bytes are not plain numbers stored in
            this file: external raw storage, a virtual dataset, no
            dataspace, or a string, compound, reference or other
            non-numeric type.
    """

    def __init__(self, filename, dataset):
        self.filename = filename
        self.key = dataset.name.lstrip("/")
        where = self.describe()
        if dataset.is_virtual:
            raise PresetError(
                f"{where} is a virtual dataset (its values come from other "
                "files); preset weights must be stored in the file itself."
            )
        if dataset.external:
            raise PresetError(
                f"{where} keeps its values in external files "
                f"({', '.join(repr(e[0]) for e in dataset.external)}); preset "
                "weights must be stored in the file itself."
            )
        if dataset.shape is None:
            raise PresetError(f"{where} has no dataspace (no values).")
        self.shape = tuple(int(d) for d in dataset.shape)
        stored = dataset.dtype
        if _small_string_attr(dataset, "dtype") == "bfloat16":
            # Keras stores bfloat16 as 2-byte opaque values.
            if stored.itemsize != 2 or stored.names or stored.kind not in "Vu":
                raise PresetError(
                    f"{where} is marked bfloat16 but stores {stored} values; "
                    "bfloat16 weights are stored as 2-byte values."
                )
            self.dtype = "bfloat16"
        elif stored.kind in "biuf" and not stored.names:
            self.dtype = keras.backend.standardize_dtype(stored)
        else:
            raise PresetError(
                f"{where} holds non-numeric values ({stored}); weights must "
                "be booleans, integers or floats."
            )

    def describe(self):
        return f"{self.filename}:{self.key}"


def _is_training_state(owner):
    # Keras's `save_weights` of a compiled model also writes its optimizer;
    # a preset's weights are the layers' only.
    return owner.split("/", 1)[0] == "optimizer"


_LINK_KINDS = {
    h5py.h5l.TYPE_SOFT: "a soft link",
    h5py.h5l.TYPE_EXTERNAL: "an external link (to another file)",
}


class WeightsFile:
    """The datasets of a preset's weights, keyed by layer path and slot.

    Every file is opened through `PresetDirectory` (a regular file inside
    the directory, never a link) and every object in it must be reached by
    a plain (hard) link; each dataset's shape and dtype are read, never its
    values, until `read`.

    Args:
        preset_dir: a directory (a path or an open `PresetDirectory`)
            holding `model.weights.h5`, or `model.weights.json` and the
            files it lists.

    Raises:
        PresetError: no weights, a link, an unreadable (e.g. truncated)
            file, soft or external links, datasets stored outside the file
            or not numeric (see `_Entry`), or layers that cannot be told
            apart by name.
    """

    def __init__(self, preset_dir):
        self.preset_dir = os.fspath(preset_dir)
        self.files = {}
        with open_preset_directory(preset_dir) as directory:
            if directory.exists(SHARDED_WEIGHTS_FILE):
                filenames = self._shard_filenames(directory)
            elif directory.exists(WEIGHTS_FILE):
                filenames = [WEIGHTS_FILE]
            else:
                raise PresetError(
                    f"The preset {self.preset_dir} has no weights: neither "
                    f"{WEIGHTS_FILE} nor {SHARDED_WEIGHTS_FILE} exists. Pass "
                    "load_weights=False to build it with random weights."
                )
            try:
                for filename in filenames:
                    self.files[filename] = self._open(directory, filename)
                self.entries = self._index()
            except BaseException:
                self.close()
                raise

    def _shard_filenames(self, directory):
        index_path = directory.join(SHARDED_WEIGHTS_FILE)
        index = directory.read_json(SHARDED_WEIGHTS_FILE)
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
                check_file_name(name, index_path)
                if name not in names:
                    names.append(name)
        return names

    def _open(self, directory, filename):
        try:
            return directory.open_h5(filename)
        except FileNotFoundError:
            raise PresetError(
                "The preset's weights are incomplete: "
                f"{directory.join(filename)} does not exist"
                + (
                    f" (listed in {SHARDED_WEIGHTS_FILE})."
                    if filename != WEIGHTS_FILE
                    else "."
                )
            ) from None

    def _path(self, filename):
        return os.path.join(self.preset_dir, filename)

    def _check_links(self, filename, h5):
        bad = []

        def visit(name, info):
            # Raising inside h5py's low-level visit is not propagated
            # cleanly: record the link and stop.
            if info.type != h5py.h5l.TYPE_HARD:
                bad.append((name.decode("utf-8", "replace"), info.type))
                return True
            return None

        h5.id.links.visit(visit, info=True)
        if bad:
            name, kind = bad[0]
            kind = _LINK_KINDS.get(kind, "a user-defined link")
            raise PresetError(
                f"{filename}:{name} is {kind}. Preset weights may only be "
                "reached by plain links inside their file, so no other file "
                "is ever read."
            )

    def _index(self):
        names = {}
        datasets = {}

        for filename, h5 in self.files.items():

            def visit(key, item, filename=filename):
                owner, _, slot = key.rpartition("/vars/")
                is_vars = key == "vars" or key.endswith("/vars")
                if isinstance(item, h5py.Group) and is_vars:
                    name = _small_string_attr(item, "name")
                    owner_path = key[: -len("vars")].rstrip("/")
                    if name is not None:
                        names[owner_path] = name
                elif (
                    isinstance(item, h5py.Dataset)
                    and slot.isdigit()
                    and not _is_training_state(owner)
                ):
                    datasets[(owner, int(slot))] = _Entry(filename, item)

            try:
                self._check_links(filename, h5)
                h5.visititems(visit)
            except (OSError, RuntimeError) as error:
                raise PresetError(
                    f"{self._path(filename)} cannot be read (truncated or "
                    f"corrupt?): {error}."
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
            # A nested functional model (its layers saved under `layers/`)
            # names no variable path: its layers were built by calls
            # outside its scope (keras-hub's `PaliGemmaVit`).
            nested_model = end < len(parts) and parts[end] == "layers"
            if name is not None and not nested_model:
                chain.append(name)
        return "/".join(chain)

    def read(self, entry, index=()):
        """Reads `entry` (or the `index` slices of it) as a numpy array.

        Only call this on entries whose shape was checked against the
        model (`check_weights`): that shape sizes the read.
        """
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
            value = value.view(numpy_dtype("bfloat16"))
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


def _saved_names(model):
    """`id(layer) -> (names path, group key)` as a weights file records them.

    The names path joins the names of the layer and of its ancestors in
    the saving tree (what `WeightsFile` reads back); the group key is
    where Keras's layout puts the layer (`layers/t5_block/layer_norm`).
    """
    groups = saved_groups(model)
    layers = dict(groups)
    found = {}
    for path, layer in groups:
        parts = path.split("/")
        names = []
        for end in range(1, len(parts) + 1):
            prefix = "/".join(parts[:end])
            # As `WeightsFile._layer_path`: a nested model names nothing.
            nested_model = end < len(parts) and parts[end] == "layers"
            if prefix in layers and not nested_model:
                names.append(layers[prefix].name)
        found[id(layer)] = ("/".join(names), path)
    return found


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
        variables = [v for v in _own_variables(layer) if id(v) not in seen]
        if not variables:
            continue
        seen.update(id(v) for v in variables)
        owners.append((layer, _layer_path(layer, variables), variables))
    shared = collections.Counter(path for _, path, _ in owners)
    saved = _saved_names(model)
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


def castable(source, target):
    def is_float(dtype):
        return dtype == "bfloat16" or np.issubdtype(
            np.dtype(dtype), np.floating
        )

    if is_float(target):
        return is_float(source)
    return source == target


def listing(problems):
    shown = "\n".join(f"  - {p}" for p in problems[:_MAX_LISTED])
    more = len(problems) - _MAX_LISTED
    return shown + (f"\n  - ... and {more} more" if more > 0 else "")


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


_ALLOW_NONFINITE = (
    "Pass allow_nonfinite=True to from_preset (or to load_weights / "
    "build_from_preset_weights) to load them anyway."
)


class LossyConversionWarning(UserWarning):
    """Preset weights loaded into a dtype that cannot hold them exactly."""


def _float_info(dtype):
    dtype = numpy_dtype(dtype)
    if np.dtype(dtype) == np.dtype(numpy_dtype("bfloat16")):
        import ml_dtypes

        return ml_dtypes.finfo(dtype)
    if np.issubdtype(dtype, np.floating):
        return np.finfo(dtype)
    return None


def is_lossy(source, target):
    """Whether casting `source` values to `target` can change them."""
    if source == target:
        return False
    source_info, target_info = _float_info(source), _float_info(target)
    if source_info is None or target_info is None:
        return False
    # Fewer mantissa bits round; a smaller exponent range overflows.
    return (
        target_info.nmant < source_info.nmant
        or target_info.maxexp < source_info.maxexp
    )


def warn_lossy(pairs, preset_dir, stacklevel):
    lossy = [
        (variable, entry)
        for variable, entry in pairs
        if is_lossy(entry.dtype, dtype_name(variable))
    ]
    if not lossy:
        return
    targets = sorted({dtype_name(v) for v, _ in lossy})
    sources = sorted({e.dtype for _, e in lossy})
    listed = [f"{v.path} ({e.dtype} in the file)" for v, e in lossy]
    warnings.warn(
        f"{len(lossy)} weight(s) of {preset_dir} are rounded to the "
        f"backbone's narrower dtype ({', '.join(targets)}) as they load:\n"
        f"{listing(listed)}\nBuild the backbone in the file's dtype "
        f"(from_preset(..., dtype={sources[-1]!r})) to keep every bit.",
        LossyConversionWarning,
        stacklevel=stacklevel + 1,
    )


def _is_float(dtype):
    return np.dtype(dtype) == np.dtype(
        numpy_dtype("bfloat16")
    ) or np.issubdtype(dtype, np.floating)


def check_finite(value, variable, entry):
    """Raises PresetError if `value` (read for `variable`) has NaN or Inf.

    Two reductions and no temporary array: a NaN makes both the minimum
    and the maximum NaN, an infinity is one of them.
    """
    if value.size == 0 or not _is_float(value.dtype):
        return
    with np.errstate(invalid="ignore", over="ignore"):
        if np.isfinite(value.min()) and np.isfinite(value.max()):
            return
        count = int(value.size - np.count_nonzero(np.isfinite(value)))
    cast = (
        f" once cast to {dtype_name(variable)}"
        if entry.dtype != dtype_name(variable)
        else ""
    )
    raise PresetError(
        f"{variable.path}: {entry.describe()} holds {count:,} NaN or "
        f"infinite value(s){cast}; nothing was loaded. {_ALLOW_NONFINITE}"
    )


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
    if not _is_float(numpy_dtype(variable.dtype)):
        return
    if not entry.shape:
        _read_checked(weights, entry, variable)
        return
    # At most `block_bytes` of float64 per block.
    rows = max(1, block_bytes // max(math.prod(entry.shape[1:]) * 8, 1))
    for start in range(0, entry.shape[0], rows):
        index = (slice(start, min(start + rows, entry.shape[0])),)
        _read_checked(weights, entry, variable, index)


def device_value(variable, read):
    """A variable's value read slice by slice, placed as its layout says.

    Shared by every preset format. On JAX each device's slice is read on
    its own (`read(index)` with `index` a tuple of slices, one per
    dimension), straight into that device's buffer; the previous slice is
    kept, so replicated dimensions are read once. On other backends the
    tensor is read whole (`read(())`). `read` returns a NumPy array in the
    variable's dtype, already checked.
    """
    if keras.backend.backend() != "jax":
        return read(())
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
            value = read(index)
            # JAX may alias a host array on CPU instead of copying it: a
            # view into a memory map closed after this variable would be
            # read after unmapping. Hand it arrays that own their data.
            if not value.flags.owndata:
                value = np.array(value)
            last["value"] = value
        return last["value"]

    return jax.make_array_from_callback(
        tuple(variable.shape), sharding, read_slice
    )


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


def with_progress(pairs, preset_dir, verbose):
    if not verbose:
        return pairs
    from rich.progress import track

    return track(pairs, description=f"Loading {preset_dir}")


def forget_deferred(model):
    """Drops `model`'s variables from Keras's list of ones to initialize."""
    from keras.src.backend.common import global_state

    pending = global_state.get_global_attribute("uninitialized_variables")
    if pending:
        ours = {id(v) for v in model.variables}
        pending[:] = [v for v in pending if id(v) not in ours]


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
        with keras.StatelessScope(initialize_variables=False):
            model = backbone_cls.from_config(config, verify_layout=False)
        try:
            pairs = check_weights(model, weights)
            # Warn at the caller of `from_preset`.
            warn_lossy(pairs, weights.preset_dir, stacklevel=3)
            progress = with_progress(pairs, weights.preset_dir, verbose)
            for variable, entry in progress:
                variable._initialize(
                    _device_value(weights, entry, variable, allow_nonfinite)
                )
                variable._initializer = None
            # Variables no file holds (e.g. random seed states) start as
            # their initializers say.
            for variable in model.variables:
                if variable._value is None:
                    variable._deferred_initialize()
        finally:
            forget_deferred(model)
    layout_map = active_layout_map()
    if model.layout_plan is not None and layout_map is not None:
        verify_layouts(model, model.layout_plan, layout_map.device_mesh)
    return model


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
