"""Preset files: read only from inside the directory, written atomically.

Reading. A preset may come from anywhere, so every file read for it
(`config.json`, `metadata.json`, the weights, a tokenizer's files) is
opened relative to the preset directory, which is opened once, one path
component at a time, each with `O_NOFOLLOW` relative to its parent's
descriptor: no component is ever resolved by the kernel through a link, so
there is no window between a check and the read. A symbolic link below the
directory (a file or a directory like `assets`) is followed only where it
stays inside the checkpoint's own storage:

- a relative link to a regular file or directory inside the preset
  directory (`model.safetensors -> weights/model.safetensors`);
- in a Hugging Face cache snapshot (`.../models--ORG--NAME/snapshots/REV/`,
  or a folder below it), a file that links into that model's own blobs
  (`../../blobs/<hash>`, as `huggingface_hub` writes them).

The link's text is read (`readlink`) and checked, and the file it names is
then opened by walking down from the preset directory's descriptor (for
blobs, from the model folder reached by `..` from the open snapshot),
again with `O_NOFOLLOW` at every step; a link that leads to another link,
an absolute link, and a link anywhere else are refused, with a message
naming the link and its target, before any byte behind it is read. The
preset directory's own name may not be a link either: pass its resolved
path (`os.path.realpath(path)`), which says you trust where it points, or
copy a preset with its links resolved (`cp -rL SRC DST`). Each file must
also be a regular file (not a FIFO or a device), and every file comes from
the one directory descriptor, so a preset that a concurrent save swaps out
is still read whole, old or new.

Writing (one file, or a whole preset, atomically and never through a
link) is `preset_staging`'s.
"""

import contextlib
import errno
import json
import os
import re
import stat

import h5py

from keras_nlp.saving.json_depth import check_json_depth

CONFIG_FILE = "config.json"
METADATA_FILE = "metadata.json"
WEIGHTS_FILE = "model.weights.h5"
SHARDED_WEIGHTS_FILE = "model.weights.json"
SHARD_FILE = re.compile(r"model_\d{5}\.weights\.h5")
# A Hugging Face checkpoint's files (`keras_nlp.saving.huggingface`).
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
SAFETENSORS_SHARD = re.compile(r"model-\d{5}-of-\d{5}\.safetensors")
# A config or a shard index is kilobytes; this only stops a huge file from
# being read into memory.
MAX_JSON_BYTES = 64 * 1024**2

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# Opening a FIFO for reading would block until a writer comes.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_HAVE_DIR_FD = (
    bool(_NOFOLLOW)
    and os.open in os.supports_dir_fd
    and os.stat in os.supports_dir_fd
    and os.stat in os.supports_follow_symlinks
    and os.readlink in os.supports_dir_fd
)
_DIRECTORY_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK
# How deep below a Hugging Face cache snapshot a checkpoint may sit (a
# repository's subfolder).
_MAX_SNAPSHOT_DEPTH = 8
_NO_DIR_FD = "is not followed on this system (no directory descriptors)"


class PresetError(ValueError):
    """A preset directory that cannot be loaded as it is."""


def strip_trailing_separators(path):
    # A trailing slash would make the kernel follow a link in the last
    # component, which O_NOFOLLOW is there to refuse.
    path = os.fspath(path)
    stripped = path.rstrip("/" + os.sep)
    return stripped or path[:1]


def check_file_name(name, where):
    """Raises unless `name` is a plain file name (no directory part)."""
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or "\0" in name
        or os.path.basename(name) != name
        or (os.altsep and os.altsep in name)
    ):
        raise PresetError(
            f"{where} lists {name!r}; weight files must be plain file names "
            "inside the preset directory."
        )


def link_target(path, dir_fd=None, name=None):
    try:
        if dir_fd is not None:
            return os.readlink(name, dir_fd=dir_fd)
        return os.readlink(path)
    except OSError:
        return "?"


def _same_file(first, second):
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _close_all(fds):
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class PresetDirectory:
    """A preset directory, opened once; its files are opened relative to it.

    Args:
        path: str or path-like, the directory. Its last component may not
            be a symbolic link (see the module docstring for why).

    Raises:
        PresetError: the directory is a link, not a directory, or cannot
            be opened.
    """

    def __init__(self, path):
        self.path = strip_trailing_separators(path)
        self._fd = None
        self._parts = ()
        self._parent = None
        # Whether closing this directory closes its parent (the folders
        # `subdirectory` walked through on the way).
        self._owns_parent = False
        # The Hugging Face cache model folder above a snapshot, found on
        # the first link that leaves the directory: (fd, depth) or False.
        self._cache = None
        if os.path.islink(self.path):
            self._refuse_directory_link()
        if not os.path.isdir(self.path):
            raise PresetError(f"The preset {self.path} is not a directory.")
        if _HAVE_DIR_FD:
            try:
                self._fd = os.open(self.path, _DIRECTORY_FLAGS)
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR):
                    self._refuse_directory_link()
                raise PresetError(
                    f"The preset directory {self.path} cannot be opened: "
                    f"{error.strerror}."
                ) from error

    @classmethod
    def _below(cls, parent, name, fd, parts):
        """The subdirectory `name` of `parent`, already opened as `fd`;
        `parts` are the folders it is below the preset directory."""
        child = cls.__new__(cls)
        child.path = parent.join(name)
        child._fd = fd
        child._parts = parts
        child._parent = parent
        child._owns_parent = False
        child._cache = None
        return child

    def _refuse_directory_link(self):
        raise PresetError(
            f"The preset directory {self.path} is a symbolic link (to "
            f"{link_target(self.path)!r}). Links are refused, not followed, "
            "so a preset cannot make this process read files elsewhere. If "
            "you trust where it points, pass the resolved path "
            f"{os.path.realpath(self.path)!r}."
        )

    def __fspath__(self):
        return self.path

    def __str__(self):
        return self.path

    def join(self, name):
        return os.path.join(self.path, name)

    def _lstat(self, name):
        if self._fd is not None:
            return os.stat(name, dir_fd=self._fd, follow_symlinks=False)
        return os.lstat(self.join(name))

    def exists(self, name):
        """Whether `name` is in the directory (a link to nowhere counts)."""
        try:
            self._lstat(name)
        except FileNotFoundError:
            return False
        return True

    # === Opening, one component at a time ===

    def open(self, name):
        """Opens the regular file `name` for reading; returns its descriptor.

        A link is followed only as the module docstring says.

        Raises:
            FileNotFoundError: no such file.
            PresetError: a link that is not followed (or leads nowhere), a
                directory, a FIFO or any other non-regular file.
        """
        _check_component(name, self.path)
        try:
            if self._fd is not None:
                fd = os.open(name, _FILE_FLAGS, dir_fd=self._fd)
            else:
                if os.path.islink(self.join(name)):
                    self._refuse_link(
                        name, link_target(self.join(name)), _NO_DIR_FD
                    )
                fd = os.open(self.join(name), _FILE_FLAGS)
        except FileNotFoundError:
            raise
        except OSError as error:
            if error.errno != errno.ELOOP or self._fd is None:
                raise PresetError(
                    f"{self.join(name)} cannot be opened: {error.strerror}."
                ) from error
            fd, _ = self._follow(name, directory=False)
        return _checked_regular(fd, self.join(name))

    def subdirectory(self, *names):
        """The directory `names` below this one (e.g. `"assets",
        "tokenizer"`), each component opened relative to the one above it.

        Close it (or use it in a `with` block) before this directory.

        Raises:
            FileNotFoundError: a component does not exist.
            NotADirectoryError: a component is a file.
            PresetError: a component is a link that is not followed.
        """
        directory = self
        try:
            for name in names:
                child = directory._open_subdirectory(name)
                child._owns_parent = directory is not self
                directory = child
        except BaseException:
            if directory is not self:
                directory.close()
            raise
        return directory

    def _open_subdirectory(self, name):
        _check_component(name, self.path)
        path = self.join(name)
        if self._fd is None:
            if os.path.islink(path):
                self._refuse_link(name, link_target(path), _NO_DIR_FD)
            if not os.path.isdir(path):
                _raise_missing_or_file(os.path.lexists(path), path)
            return PresetDirectory._below(self, name, None, None)
        try:
            fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=self._fd)
            parts = (*self._parts, name)
        except FileNotFoundError:
            _raise_missing_or_file(False, path)
        except OSError as error:
            if error.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise PresetError(
                    f"{path} cannot be opened: {error.strerror}."
                ) from error
            if not stat.S_ISLNK(self._lstat(name).st_mode):
                _raise_missing_or_file(True, path)
            fd, parts = self._follow(name, directory=True)
        return PresetDirectory._below(self, name, fd, parts)

    def _follow(self, name, directory):
        """Opens what the link `name` points at, if it stays inside the
        checkpoint's storage (see the module docstring); else refuses."""
        target = os.readlink(name, dir_fd=self._fd)
        if os.path.isabs(target):
            self._refuse_link(name, target, "is absolute")
        parts = [part for part in target.split("/") if part not in ("", ".")]
        ups = 0
        while ups < len(parts) and parts[ups] == "..":
            ups += 1
        rest = parts[ups:]
        if not rest or ".." in rest:
            self._refuse_link(name, target, "is not a plain relative path")
        # Where the link is, as folders below the preset directory (where
        # a followed folder link led, not the names it was reached by).
        position = self._parts
        top = self
        while top._parent is not None:
            top = top._parent
        if ups <= len(position):
            parts = (*position[: len(position) - ups], *rest)
            fd = top._walk(parts, directory, self.join(name), target)
            return fd, parts
        cache = top._cache_folder()
        if cache is None:
            self._refuse_link(
                name, target, "leads outside the preset directory"
            )
        folder_fd, top_depth = cache
        if (
            directory
            or len(rest) != 2
            or rest[0] != "blobs"
            or ups != len(position) + top_depth + 2
        ):
            self._refuse_link(
                name,
                target,
                "leads outside the snapshot and not into this model's "
                "blobs/ folder",
            )
        fd = _open_blob(folder_fd, rest[1], self.join(name), target)
        return fd, None

    def _walk(self, parts, directory, link, target):
        """Opens `parts` below this directory, never through a link."""
        opened = []
        fd = self._fd
        try:
            for index, part in enumerate(parts):
                last = index == len(parts) - 1
                flags = (
                    _FILE_FLAGS if last and not directory else _DIRECTORY_FLAGS
                )
                try:
                    fd = os.open(part, flags, dir_fd=fd)
                except FileNotFoundError:
                    raise PresetError(
                        f"{link} is a symbolic link to {target!r}, which "
                        "does not exist."
                    ) from None
                except OSError as error:
                    kind = os.stat(part, dir_fd=fd, follow_symlinks=False)
                    if stat.S_ISLNK(kind.st_mode):
                        _refuse(
                            link,
                            target,
                            f"leads to another symbolic link ({part!r})",
                        )
                    if error.errno == errno.ENOTDIR:
                        _raise_missing_or_file(True, link)
                    raise PresetError(
                        f"{link} (a link to {target!r}) cannot be opened: "
                        f"{error.strerror}."
                    ) from error
                opened.append(fd)
            return opened.pop()
        finally:
            _close_all(opened)

    def _cache_folder(self):
        """`(fd, depth)` of the Hugging Face cache model folder this
        directory is a snapshot of (`depth` folders below the snapshot
        root), or None."""
        if self._cache is None:
            self._cache = self._find_cache_folder() or False
        return self._cache or None

    def _find_cache_folder(self):
        parts = os.path.realpath(self.path).split(os.sep)
        for depth in range(_MAX_SNAPSHOT_DEPTH + 1):
            index = len(parts) - 2 - depth
            if index < 1:
                return None
            if parts[index] == "snapshots" and parts[index - 1].startswith(
                "models--"
            ):
                break
        else:
            return None
        # Up from the open directory itself: the blobs are those of the
        # very folder the files were read from, not of a path looked up
        # again.
        opened = []
        try:
            fd = self._fd
            for _ in range(depth + 2):
                fd = os.open("..", _DIRECTORY_FLAGS, dir_fd=fd)
                opened.append(fd)
            snapshots = os.fstat(opened[-2])
            listed = os.stat("snapshots", dir_fd=fd, follow_symlinks=False)
            if not _same_file(snapshots, listed):
                return None
            opened.pop()
            return fd, depth
        except OSError:
            return None
        finally:
            _close_all(opened)

    def _refuse_link(self, name, target, why):
        _refuse(self.join(name), target, why)

    def read_bytes(self, name, max_bytes, why):
        """The contents of the file `name`, refused past `max_bytes`.

        The size is checked before anything is read, and the read stops
        past `max_bytes` (a file that grows meanwhile), so a huge file
        costs nothing.

        Args:
            name: the file's name.
            max_bytes: int, a whole number of MiB.
            why: str, why the cap is enough, said in the error ("a
                preset's JSON files are kilobytes").

        Raises:
            FileNotFoundError, PresetError: see `open`; PresetError also
                for a file larger than `max_bytes`.
        """
        fd = self.open(name)
        with os.fdopen(fd, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            data = b"" if size > max_bytes else file.read(max_bytes + 1)
        if max(size, len(data)) > max_bytes:
            raise PresetError(
                f"{self.join(name)} is larger than {max_bytes // 1024**2} "
                f"MiB; {why}."
            )
        return data

    def read_json(self, name):
        """Reads the JSON file `name`, with errors naming the file.

        Raises:
            PresetError: missing, a link that is not followed, larger than
                `MAX_JSON_BYTES`, or not JSON.
        """
        path = self.join(name)
        try:
            data = self.read_bytes(
                name, MAX_JSON_BYTES, "a preset's JSON files are kilobytes"
            )
        except FileNotFoundError:
            raise PresetError(
                f"The preset has no {name}: {path} does not exist."
            ) from None
        check_json_depth(data, path, PresetError)
        try:
            return json.loads(data.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise PresetError(f"{path} is not valid JSON: {error}.") from error

    def open_h5(self, name):
        """Opens the HDF5 file `name` read-only, through a checked descriptor.

        Raises:
            FileNotFoundError, PresetError: see `open`; PresetError also
                when the file is not HDF5 (truncated or corrupt).
        """
        fd = self.open(name)
        try:
            proc_path = f"/proc/self/fd/{fd}"
            if os.path.exists(proc_path):
                # HDF5 opens the very file behind our descriptor, by its
                # own path, with its fast POSIX driver.
                return h5py.File(proc_path, "r")
            # Elsewhere HDF5 reads through the file object.
            return h5py.File(os.fdopen(os.dup(fd), "rb"), "r")
        except OSError as error:
            raise PresetError(
                f"{self.join(name)} cannot be read as an HDF5 weights file "
                f"(truncated or corrupt?): {error}."
            ) from error
        finally:
            os.close(fd)

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._cache:
            _close_all([self._cache[0]])
        self._cache = None
        if self._owns_parent:
            self._owns_parent = False
            self._parent.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def _check_component(name, where):
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or "/" in name
        or "\0" in name
        or (os.altsep and os.altsep in name)
    ):
        raise PresetError(
            f"{name!r} is not a plain file name (looked up in {where})."
        )


def _raise_missing_or_file(exists, path):
    if exists:
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory", path)
    raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)


def _refuse(link, target, why):
    raise PresetError(
        f"{link} is a symbolic link (to {target!r}), which {why}. Links "
        "below a preset directory are followed only to a file or folder "
        "inside it, or, in a Hugging Face cache snapshot "
        "(models--ORG--NAME/snapshots/REV/), from a file into that model's "
        "own blobs/ folder; this one is refused, and nothing behind it was "
        "read. If you trust where it points, copy the preset with its "
        "links resolved (cp -rL SRC DST)."
    )


def _open_blob(folder_fd, blob, link, target):
    """Opens `blobs/<blob>` of a cache model folder, never through a link."""
    try:
        blobs = os.open("blobs", _DIRECTORY_FLAGS, dir_fd=folder_fd)
    except FileNotFoundError:
        raise PresetError(
            f"{link} is a symbolic link to {target!r}, but the model's "
            "cache folder has no blobs/ folder."
        ) from None
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            _refuse(link, target, "leads into a blobs/ that is not a folder")
        raise PresetError(
            f"{link} (a link to {target!r}) cannot be opened: {error.strerror}."
        ) from error
    try:
        return os.open(blob, _FILE_FLAGS, dir_fd=blobs)
    except FileNotFoundError:
        raise PresetError(
            f"{link} is a symbolic link to {target!r}, which does not exist "
            "(an incomplete download?)."
        ) from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            _refuse(link, target, "leads to a blob that is itself a link")
        raise PresetError(
            f"{link} (a link to {target!r}) cannot be opened: {error.strerror}."
        ) from error
    finally:
        os.close(blobs)


def _checked_regular(fd, path):
    """`fd` if it is a regular file, in blocking mode; else closes it and
    raises PresetError."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PresetError(
            f"{path} is not a regular file; preset files must be regular "
            "files inside the preset directory."
        )
    if _NONBLOCK:
        os.set_blocking(fd, True)
    return fd


@contextlib.contextmanager
def open_preset_directory(preset):
    """`preset` as an open `PresetDirectory` (an open one is reused)."""
    if isinstance(preset, PresetDirectory):
        yield preset
        return
    with PresetDirectory(preset) as directory:
        yield directory
