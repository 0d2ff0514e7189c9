"""Writing a backbone's weights as `.weights.h5` files, shard by shard.

The files are laid out as Keras's `save_weights` lays them out (see
`h5_layout`), split over `model_NNNNN.weights.h5` files listed in
`model.weights.json` above a size. Each variable goes to the file piece by
piece as its devices hold it (`weight_transfer.host_pieces`).
"""

import contextlib
import math
import os

import h5py
import numpy as np

from keras_nlp import multihost
from keras_nlp.distribution.lora_adapters import LORA_ADAPTERS
from keras_nlp.saving.h5_layout import join_group
from keras_nlp.saving.h5_layout import own_variables
from keras_nlp.saving.h5_layout import saved_groups
from keras_nlp.saving.preset_files import SHARD_FILE
from keras_nlp.saving.preset_files import SHARDED_WEIGHTS_FILE
from keras_nlp.saving.preset_files import WEIGHTS_FILE
from keras_nlp.saving.preset_staging import write_json
from keras_nlp.saving.weight_transfer import host_pieces
from keras_nlp.saving.weight_transfer import numpy_dtype


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
        vars_path = join_group(path, "vars")
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
        if v.name not in LORA_ADAPTERS
    )


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
            if getattr(saveable, "quantization_mode", None) and not getattr(
                saveable, "lora_enabled", False
            ):
                # Keras's own writer of a quantized layer built from a
                # DTypePolicyMap (a quantized preset) reads the map's
                # float mode and loses the scales; its variables, in
                # Keras's order, are what it would write.
                for index, variable in enumerate(own_variables(saveable)):
                    slots[str(index)] = variable.value
            else:
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
