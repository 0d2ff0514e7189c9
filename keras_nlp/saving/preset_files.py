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

Writing. `staged_preset` gives a fresh directory beside the target
(`.NAME.saving-XXXXXXXX`), flushes what was written into it to disk and
swaps it in with one rename (Linux's `RENAME_EXCHANGE`; two renames
elsewhere), so a save that fails, runs out of space or is killed leaves the
previous preset as it was. A lock file beside the target (`.NAME.lock`, an
`flock` that the kernel releases if the process dies) makes a second,
concurrent save fail at once with `PresetBusyError`. Files of the old
directory that are not the backbone's (a tokenizer, a README) are carried
over as hard links, or copies where links are not supported. Nothing is
written through a symbolic link: the target may not be one, and every file
is created exclusively in the fresh directory.
"""

import contextlib
import ctypes
import errno
import json
import os
import re
import secrets
import shutil
import stat

import h5py

try:
    import fcntl
except ImportError:  # Windows: no flock; see `_lock`.
    fcntl = None

CONFIG_FILE = "config.json"
METADATA_FILE = "metadata.json"
WEIGHTS_FILE = "model.weights.h5"
SHARDED_WEIGHTS_FILE = "model.weights.json"
SHARD_FILE = re.compile(r"model_\d{5}\.weights\.h5")
# A Hugging Face checkpoint's weights (`keras_nlp.saving.huggingface`).
HUGGINGFACE_FILES = ("model.safetensors", "model.safetensors.index.json")
HUGGINGFACE_SHARD = re.compile(r"model-\d{5}-of-\d{5}\.safetensors")
# The files `save_to_preset` writes; anything else in a preset is kept.
BACKBONE_FILES = (
    CONFIG_FILE,
    METADATA_FILE,
    WEIGHTS_FILE,
    SHARDED_WEIGHTS_FILE,
)
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


class PresetBusyError(RuntimeError):
    """Another save to the same preset directory is in progress."""


def _strip(path):
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


def _link_target(path, dir_fd=None, name=None):
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
        self.path = _strip(path)
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
            f"{_link_target(self.path)!r}). Links are refused, not followed, "
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
        target = _link_target(self.join(name), self._fd, name)
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


def _os_error(error, path):
    """The same kind of OSError, carrying `path`."""
    reason = error.strerror or str(error)
    if error.errno:
        return OSError(error.errno, reason, path)
    new = OSError(reason)
    new.filename = path
    return new


def _fsync(path):
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
        raise _os_error(error, path) from error


def write_json(directory, name, value):
    write_file(directory, name, json.dumps(value, indent=4).encode("utf-8"))


def is_backbone_file(name):
    """Whether `save_to_preset` writes (and so replaces) a file so named."""
    return (
        name in BACKBONE_FILES
        or name in HUGGINGFACE_FILES
        or bool(SHARD_FILE.fullmatch(name))
        or bool(HUGGINGFACE_SHARD.fullmatch(name))
    )


def _exchange(first, second):
    """Swaps two paths in one step (Linux `renameat2`); False if unsupported."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = renameat2(
        at_fdcwd,
        os.fsencode(first),
        at_fdcwd,
        os.fsencode(second),
        rename_exchange,
    )
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), second)


def _swap_in(staging, target, parent, name):
    """Moves `staging` to `target`; returns where the old preset now is."""
    if not os.path.lexists(target):
        os.rename(staging, target)
        return None
    if _exchange(staging, target):
        return staging
    # Two renames: a process killed between them leaves the old preset
    # whole under this name (the next save removes it).
    old = os.path.join(parent, f".{name}.old-{secrets.token_hex(4)}")
    os.rename(target, old)
    try:
        os.rename(staging, target)
    except BaseException:
        os.rename(old, target)
        raise
    return old


def _carry_over(source, destination, keep=None):
    """Links (or copies) the entries of `source` that `keep` accepts."""
    for entry in os.scandir(source):
        if keep is not None and not keep(entry.name):
            continue
        target = os.path.join(destination, entry.name)
        if entry.is_dir(follow_symlinks=False):
            os.mkdir(target)
            shutil.copystat(entry.path, target, follow_symlinks=False)
            _carry_over(entry.path, target)
            continue
        try:
            # A link is carried as a link: nothing is read through it.
            os.link(entry.path, target, follow_symlinks=False)
        except OSError:
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), target)
            else:
                shutil.copy2(entry.path, target, follow_symlinks=False)


def _remove_stale(parent, name):
    """Removes what killed saves to `name` left beside it."""
    stale = re.compile(rf"\.{re.escape(name)}\.(saving|old)-[0-9a-f]{{8}}")
    for entry in os.scandir(parent):
        if stale.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)


@contextlib.contextmanager
def _lock(parent, name, target):
    """Holds `.NAME.lock` beside the target, or raises PresetBusyError."""
    path = os.path.join(parent, f".{name}.lock")
    busy = PresetBusyError(
        f"Another save to {target} is in progress (it holds the lock file "
        f"{path}). Wait for it to finish, or save to another directory."
    )
    flags = os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC
    if fcntl is None:
        flags |= os.O_EXCL
    for _ in range(10):
        try:
            fd = os.open(path, flags, 0o666)
        except FileExistsError:
            raise PresetBusyError(
                f"{busy} If no save is running, remove {path}."
            ) from None
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise PresetError(
                    f"The lock file {path} is a symbolic link; save_to_preset "
                    "writes nothing through links. Remove it."
                ) from None
            raise _os_error(error, path) from error
        if fcntl is None:
            break
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise busy from None
        # The holder before us may have removed the file after we opened
        # it; then our lock is on a file nobody else will see.
        try:
            current = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            current = None
        mine = os.fstat(fd)
        if current is not None and (current.st_dev, current.st_ino) == (
            mine.st_dev,
            mine.st_ino,
        ):
            break
        os.close(fd)
    else:
        raise busy
    try:
        yield
    finally:
        # Removed while still held, so the next saver locks a new file.
        with contextlib.suppress(OSError):
            os.remove(path)
        os.close(fd)


def _new_directory(parent, name, target):
    while True:
        path = os.path.join(parent, f".{name}.saving-{secrets.token_hex(4)}")
        try:
            # 0o777 less the umask, as `os.makedirs` would give the target.
            os.mkdir(path, 0o777)
        except FileExistsError:
            continue
        if os.path.isdir(target):
            shutil.copystat(target, path)
        return path


def _failure(error, staging, target):
    """The error to raise when a save into `staging` failed with `error`."""
    path = error.filename or staging
    reason = error.strerror or str(error)
    parent = os.path.dirname(os.path.abspath(target))
    hint = ""
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = (
            " save_to_preset writes the new preset beside the old one and "
            f"then swaps them, so it needs write access to {parent}."
        )
    elif error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        hint = (
            f" The disk holding {parent} needs room for a second copy of "
            "the preset: the old one is kept until the new one is complete."
        )
    where = path if path == target else f"{path} (for {target})"
    message = (
        f"save_to_preset could not write {where}: {reason}.{hint} The "
        f"preset at {target} was left as it was."
    )
    # The message names the path (a `filename` would repeat it).
    return OSError(error.errno, message) if error.errno else OSError(message)


@contextlib.contextmanager
def staged_preset(target, active=True):
    """Yields a fresh directory to write a preset in; swaps it in on success.

    On an exception nothing at `target` changes and the fresh directory is
    removed; OSErrors become OSErrors of the same kind whose message names
    the path and says the old preset is intact.

    Args:
        target: str or path-like, the preset directory (created if missing,
            with its parents).
        active: bool. False (processes other than 0 of a cluster) yields
            None and touches nothing.

    Raises:
        PresetBusyError: another save to `target` holds its lock.
        ValueError: `target` is a file or a symbolic link.
    """
    target = _strip(target)
    if os.path.islink(target):
        raise ValueError(
            f"save_to_preset does not write through symbolic links, and "
            f"{target} is one (to {_link_target(target)!r}). Pass the "
            f"resolved path {os.path.realpath(target)!r} to save there."
        )
    if os.path.exists(target) and not os.path.isdir(target):
        raise ValueError(
            f"save_to_preset needs a directory; {target!r} is a file."
        )
    if not active:
        yield None
        return
    parent, name = os.path.split(os.path.abspath(target))
    staging = None
    try:
        os.makedirs(parent, exist_ok=True)
        with _lock(parent, name, target):
            _remove_stale(parent, name)
            staging = _new_directory(parent, name, target)
            yield staging
            for entry in os.scandir(staging):
                _fsync(entry.path)
            if os.path.isdir(target) and not os.path.islink(target):
                # A tokenizer or a README saved next to the backbone stays.
                _carry_over(
                    target, staging, keep=lambda n: not is_backbone_file(n)
                )
            _fsync(staging)
            old = _swap_in(staging, target, parent, name)
            staging = None
            # The new preset is in place: nothing after this may fail the
            # save.
            with contextlib.suppress(OSError):
                _fsync(parent)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
    except OSError as error:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise _failure(error, staging or parent, target) from error
    except BaseException:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise
