"""Preset files: read only from inside the directory, written atomically.

Reading. A preset may come from anywhere, so every file opened for it
(`config.json`, `metadata.json`, `model.weights.h5`, `model.weights.json`
and the shards it lists) is opened relative to the preset directory, which
is opened once, and with `O_NOFOLLOW`: symbolic links are refused outright,
the directory's own name included, instead of being resolved and checked to
stay inside. Refusing is the safer rule: a link that points inside when it
is checked can be re-pointed before it is opened, while a refused link
leaves no such window; and neither `save_to_preset` nor keras-hub ever
writes one. To load a directory made of links (a Hugging Face cache
snapshot, whose files link to blobs), copy it with the links resolved
(`cp -rL SRC DST`); for a directory whose own name is a link, pass its
resolved path (`os.path.realpath(path)`), which says you trust where it
points. Each file must also be a regular file (not a FIFO or a device),
and every file comes from the one directory descriptor, so a preset that a
concurrent save swaps out is still read whole, old or new.

Writing. `write_file` replaces one file atomically, never through a link;
`preset_staging` saves a whole preset the same way.
"""

import contextlib
import errno
import json
import os
import re
import secrets
import stat

import h5py

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
)


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
        if os.path.islink(self.path):
            self._refuse_directory_link()
        if not os.path.isdir(self.path):
            raise PresetError(f"The preset {self.path} is not a directory.")
        if _HAVE_DIR_FD:
            try:
                self._fd = os.open(
                    self.path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
                )
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR):
                    self._refuse_directory_link()
                raise PresetError(
                    f"The preset directory {self.path} cannot be opened: "
                    f"{error.strerror}."
                ) from error

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

    def _refuse_link(self, name):
        target = link_target(self.join(name), self._fd, name)
        raise PresetError(
            f"{self.join(name)} is a symbolic link (to {target!r}). Preset "
            "files must be regular files inside the preset directory, so "
            "links are refused, not followed. If you trust where it points, "
            "copy the preset with its links resolved (cp -rL SRC DST)."
        )

    def open(self, name):
        """Opens the regular file `name` for reading; returns its descriptor.

        Raises:
            FileNotFoundError: no such file.
            PresetError: a link, a directory, a FIFO or any other
                non-regular file.
        """
        flags = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK
        try:
            if self._fd is not None:
                fd = os.open(name, flags, dir_fd=self._fd)
            else:
                if os.path.islink(self.join(name)):
                    self._refuse_link(name)
                fd = os.open(self.join(name), flags)
        except FileNotFoundError:
            raise
        except OSError as error:
            if error.errno == errno.ELOOP:
                self._refuse_link(name)
            raise PresetError(
                f"{self.join(name)} cannot be opened: {error.strerror}."
            ) from error
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise PresetError(
                f"{self.join(name)} is not a regular file; preset files must "
                "be regular files inside the preset directory."
            )
        if _NONBLOCK:
            os.set_blocking(fd, True)
        return fd

    def read_json(self, name):
        """Reads the JSON file `name`, with errors naming the file.

        Raises:
            PresetError: missing, a link, larger than `MAX_JSON_BYTES`, or
                not JSON.
        """
        path = self.join(name)
        try:
            fd = self.open(name)
        except FileNotFoundError:
            raise PresetError(
                f"The preset has no {name}: {path} does not exist."
            ) from None
        with os.fdopen(fd, "rb") as file:
            data = file.read(MAX_JSON_BYTES + 1)
        if len(data) > MAX_JSON_BYTES:
            raise PresetError(
                f"{path} is larger than {MAX_JSON_BYTES // 1024**2} MiB; a "
                "preset's JSON files are kilobytes."
            )
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

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


@contextlib.contextmanager
def open_preset_directory(preset):
    """`preset` as an open `PresetDirectory` (an open one is reused)."""
    if isinstance(preset, PresetDirectory):
        yield preset
        return
    with PresetDirectory(preset) as directory:
        yield directory


# === Writing ===


def os_error_naming(error, path):
    """The same kind of OSError, carrying `path`."""
    reason = error.strerror or str(error)
    if error.errno:
        return OSError(error.errno, reason, path)
    new = OSError(reason)
    new.filename = path
    return new


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY | _CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as error:
        # Some filesystems cannot sync a directory; the data is written.
        if error.errno not in (errno.EINVAL, errno.EBADF, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def write_file(directory, name, data):
    """Writes `data` (bytes) as `directory/name`, replacing it atomically.

    The bytes go to a new file (created exclusively, so never through a
    link), which is flushed and then renamed over `name`; a link at `name`
    is replaced, its target untouched.
    """
    path = os.path.join(directory, name)
    temporary = os.path.join(directory, f".{name}.{secrets.token_hex(4)}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    try:
        fd = os.open(temporary, flags, 0o666)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(temporary)
            raise
    except OSError as error:
        raise os_error_naming(error, path) from error


def write_json(directory, name, value):
    write_file(directory, name, json.dumps(value, indent=4).encode("utf-8"))
