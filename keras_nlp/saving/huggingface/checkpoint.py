"""Hugging Face checkpoint directories: `config.json` and safetensors files.

A checkpoint is `config.json` (with a `model_type`) and either
`model.safetensors` or `model.safetensors.index.json` plus the files its
`weight_map` names. Every file is opened through `PresetDirectory` (a
regular file inside the directory, opened without following links except
where its rules allow: a link inside the directory, or, in a Hugging Face
cache snapshot `models--ORG--NAME/snapshots/REV/`, a link into that model's
own `blobs/`) and the index may only name plain file names in the
directory. safetensors then maps the very file behind the checked
descriptor (`/proc/self/fd/N`), never a path looked up again. Headers
(names, shapes, dtypes) are read when the checkpoint is opened; values only
by `read`, by slice, from a memory map that lives only as long as one
`reading` block, so the pages a load touched leave the process with each
tensor. float8 tensors (block-scaled FP8 weights), for which safetensors'
NumPy reader has no type, are copied out of a map of that same
descriptor, at the offsets their file's header gives.
"""

import contextlib
import json
import mmap
import os
import struct

import ml_dtypes  # (also lets safetensors return bfloat16 arrays)
import numpy as np

from keras_nlp.saving.preset_files import CONFIG_FILE
from keras_nlp.saving.preset_files import METADATA_FILE
from keras_nlp.saving.preset_files import SAFETENSORS_FILE
from keras_nlp.saving.preset_files import SAFETENSORS_INDEX
from keras_nlp.saving.preset_files import PresetError
from keras_nlp.saving.preset_files import check_file_name
from keras_nlp.saving.preset_files import open_preset_directory

# safetensors dtype codes <-> Keras dtype names.
DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "BOOL": "bool",
    # Block-scaled FP8 weights (`fp8.Fp8`), read through `_RAW`.
    "F8_E4M3": "float8_e4m3fn",
}
CODES = {name: code for code, name in DTYPES.items()}
# Dtypes safetensors' NumPy reader has no type for: `reading` copies their
# boxes out of its own map of the file.
_RAW = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn}


def is_huggingface_directory(directory):
    """Whether `directory` (a path or an open `PresetDirectory`) holds a
    Hugging Face checkpoint: a `config.json` with a `model_type` and no
    `metadata.json` (which our presets and keras-hub's always have)."""
    with open_preset_directory(directory) as opened:
        if opened.exists(METADATA_FILE) or not opened.exists(CONFIG_FILE):
            return False
        try:
            data = opened.read_json(CONFIG_FILE)
        except PresetError:
            return False
    return isinstance(data, dict) and "model_type" in data


def read_huggingface_config(directory):
    """`config.json` of a Hugging Face checkpoint, as a dict."""
    with open_preset_directory(directory) as opened:
        data = opened.read_json(CONFIG_FILE)
        path = opened.join(CONFIG_FILE)
    if not isinstance(data, dict) or not isinstance(
        data.get("model_type"), str
    ):
        raise PresetError(
            f"{path} must be a JSON object with a 'model_type' string, as "
            "Hugging Face writes it."
        )
    return data


class TensorInfo:
    """A tensor of a checkpoint: its file, name, shape and dtype (and, for
    a dtype read from the file's bytes, where its data starts)."""

    def __init__(self, filename, name, shape, dtype, offset=None):
        self.filename = filename
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype
        self.offset = offset

    def describe(self):
        return f"{self.filename}:{self.name}"


def _safe_open(path):
    from safetensors import safe_open

    return safe_open(path, framework="numpy")


def _data_offsets(fd):
    """`{name: byte offset of its data}` of the safetensors file `fd`: an
    8-byte little-endian header size, the JSON header (each tensor's
    `data_offsets` from the end of the header), then the data."""
    (size,) = struct.unpack("<Q", os.pread(fd, 8, 0))
    header = os.pread(fd, size, 8)
    if len(header) != size:
        raise ValueError("the header is truncated")
    start = 8 + size
    return {
        name: start + int(entry["data_offsets"][0])
        for name, entry in json.loads(header).items()
        if name != "__metadata__"
    }


def _close_map(mapped):
    # A view still held (by a traceback's frames) keeps the map open
    # until it goes.
    with contextlib.suppress(BufferError):
        mapped.close()


class Checkpoint:
    """The safetensors files of a Hugging Face checkpoint, headers read.

    Args:
        directory: the checkpoint directory (a path or an open
            `PresetDirectory`).

    Attributes:
        tensors: dict of tensor name -> `TensorInfo`.

    Raises:
        PresetError: no weights, a missing, truncated or unreadable file
            (the message names it), an index naming a file outside the
            directory or a tensor its file lacks, or a dtype we cannot
            load.
    """

    def __init__(self, directory):
        self._stack = contextlib.ExitStack()
        self._directory = self._stack.enter_context(
            open_preset_directory(directory)
        )
        self.path = os.fspath(self._directory)
        self._fds = {}
        self.tensors = {}
        try:
            self._read()
        except BaseException:
            self.close()
            raise

    def _read(self):
        directory = self._directory
        if directory.exists(SAFETENSORS_INDEX):
            files, weight_map = self._read_index()
        elif directory.exists(SAFETENSORS_FILE):
            files, weight_map = [SAFETENSORS_FILE], None
        else:
            raise PresetError(
                f"The Hugging Face checkpoint {self.path} has no weights: "
                f"neither {SAFETENSORS_FILE} nor {SAFETENSORS_INDEX} exists "
                "(only safetensors weights are read, never pickled .bin "
                "files). Pass load_weights=False to build it with random "
                "weights."
            )
        found = {}
        for filename in files:
            found.update(self._read_header(filename, weight_map))
        if weight_map is None:
            self.tensors = found
            return
        lacking = [
            f"{name} (in {filename})"
            for name, filename in weight_map.items()
            if name not in found
        ]
        if lacking:
            raise PresetError(
                f"{directory.join(SAFETENSORS_INDEX)} lists tensors that "
                f"their files do not hold:\n  - " + "\n  - ".join(lacking[:8])
            )
        self.tensors = {name: found[name] for name in weight_map}

    def _read_index(self):
        directory = self._directory
        path = directory.join(SAFETENSORS_INDEX)
        index = directory.read_json(SAFETENSORS_INDEX)
        weight_map = (
            index.get("weight_map") if isinstance(index, dict) else None
        )
        if not isinstance(weight_map, dict) or not all(
            isinstance(v, str) for v in weight_map.values()
        ):
            raise PresetError(
                f"{path} must hold an object with a 'weight_map' of tensor "
                "name -> file name."
            )
        files = []
        for filename in weight_map.values():
            if filename not in files:
                check_file_name(filename, path)
                files.append(filename)
        return files, weight_map

    def _file_path(self, filename):
        """A path to `filename` that opens exactly the checked file."""
        fd = self._fds[filename]
        proc = f"/proc/self/fd/{fd}"
        return proc if os.path.exists(proc) else self._directory.join(filename)

    def _read_header(self, filename, weight_map):
        directory = self._directory
        try:
            self._fds[filename] = directory.open(filename)
        except FileNotFoundError:
            listed = f" (listed in {SAFETENSORS_INDEX})" if weight_map else ""
            raise PresetError(
                "The checkpoint's weights are incomplete: "
                f"{directory.join(filename)} does not exist{listed}."
            ) from None
        found = {}
        try:
            with _safe_open(self._file_path(filename)) as file:
                for name in file.keys():
                    sliced = file.get_slice(name)
                    code = sliced.get_dtype()
                    if code not in DTYPES:
                        raise PresetError(
                            f"{directory.join(filename)}:{name} has dtype "
                            f"{code}; loadable dtypes are "
                            f"{', '.join(DTYPES)}."
                        )
                    found[name] = TensorInfo(
                        filename, name, sliced.get_shape(), DTYPES[code]
                    )
            raw = [i for i in found.values() if i.dtype in _RAW]
            if raw:
                offsets = _data_offsets(self._fds[filename])
                for info in raw:
                    info.offset = offsets[info.name]
        except PresetError:
            raise
        except Exception as error:  # safetensors' own error type
            raise PresetError(
                f"{directory.join(filename)} cannot be read as a safetensors "
                f"file (truncated or corrupt?): {error}."
            ) from error
        if weight_map is not None:
            found = {
                name: info
                for name, info in found.items()
                if weight_map.get(name) == filename
            }
        return found

    @contextlib.contextmanager
    def reading(self, filenames):
        """Yields `read(name, box)` with `filenames` mapped for its duration.

        `box` is one `(start, stop)` per dimension; the read copies exactly
        those values out of the map.
        """
        with contextlib.ExitStack() as stack:
            opened = {}
            maps = {}
            for filename in filenames:
                try:
                    opened[filename] = stack.enter_context(
                        _safe_open(self._file_path(filename))
                    )
                except Exception as error:
                    raise PresetError(
                        f"{self._directory.join(filename)} cannot be read: "
                        f"{error}."
                    ) from error

            def read_raw(info, box):
                if info.filename not in maps:
                    maps[info.filename] = mmap.mmap(
                        self._fds[info.filename], 0, access=mmap.ACCESS_READ
                    )
                    stack.callback(_close_map, maps[info.filename])
                whole = np.ndarray(
                    info.shape,
                    _RAW[info.dtype],
                    buffer=maps[info.filename],
                    offset=info.offset,
                )
                return np.array(whole[tuple(slice(a, b) for a, b in box)])

            def read(name, box):
                info = self.tensors[name]
                try:
                    if info.dtype in _RAW:
                        return read_raw(info, box)
                    sliced = opened[info.filename].get_slice(name)
                    if not info.shape:
                        value = opened[info.filename].get_tensor(name)
                    else:
                        value = sliced[tuple(slice(a, b) for a, b in box)]
                except Exception as error:
                    raise PresetError(
                        f"Reading {self._directory.join(info.filename)}:"
                        f"{name} failed (truncated or corrupt file?): "
                        f"{error}."
                    ) from error
                return np.asarray(value)

            yield read

    def close(self):
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = {}
        self._stack.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
