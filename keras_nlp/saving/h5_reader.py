"""Reading a preset's `.weights.h5` files safely, dataset by dataset.

`WeightsFile` opens every file through `PresetDirectory` and refuses what
could make it read elsewhere (links, external storage, virtual datasets) or
read something other than numbers. It indexes each dataset by the names
path of its layer (`h5_layout.names_path`) and its slot, reading shapes and
dtypes only; values are read slice by slice, on demand.
"""

import os

import h5py
import keras
import numpy as np

from keras_nlp.saving.h5_layout import names_path
from keras_nlp.saving.preset_files import SHARDED_WEIGHTS_FILE
from keras_nlp.saving.preset_files import WEIGHTS_FILE
from keras_nlp.saving.preset_files import PresetError
from keras_nlp.saving.preset_files import check_file_name
from keras_nlp.saving.preset_files import open_preset_directory
from keras_nlp.saving.weight_transfer import numpy_dtype


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
            layer_path = names_path(owner, names)
            if (layer_path, slot) in entries:
                other = entries[(layer_path, slot)]
                raise PresetError(
                    f"Two weights of the preset have the same layer path "
                    f"{layer_path!r}: {other.describe()} and "
                    f"{entry.describe()}."
                )
            entries[(layer_path, slot)] = entry
        return entries

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
