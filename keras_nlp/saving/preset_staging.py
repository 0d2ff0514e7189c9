"""Saving a preset atomically: written beside the target, then swapped in.

`staged_preset` gives a fresh directory beside the target
(`.NAME.saving-XXXXXXXX`), flushes what was written into it to disk and
swaps it in with one rename (Linux's `RENAME_EXCHANGE`; two renames
elsewhere), so a save that fails, runs out of space or is killed leaves the
previous preset as it was. A lock file beside the target (`.NAME.lock`, an
`flock` that the kernel releases if the process dies) makes a second,
concurrent save fail at once with `PresetBusyError`. Files of the old
directory that are not the backbone's (a tokenizer, a README) are carried
over as hard links, or copies where links are not supported, each entry
opened relative to its folder's descriptor and never through a link (a
link is carried as a link, unread). Nothing is written through a symbolic
link: the target may not be one, and every file is created exclusively in
the fresh directory. `write_file` and `write_json` replace one file in a
directory the same way.
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

from keras_nlp.saving.preset_files import CONFIG_FILE
from keras_nlp.saving.preset_files import METADATA_FILE
from keras_nlp.saving.preset_files import SAFETENSORS_FILE
from keras_nlp.saving.preset_files import SAFETENSORS_INDEX
from keras_nlp.saving.preset_files import SAFETENSORS_SHARD
from keras_nlp.saving.preset_files import SHARD_FILE
from keras_nlp.saving.preset_files import SHARDED_WEIGHTS_FILE
from keras_nlp.saving.preset_files import WEIGHTS_FILE
from keras_nlp.saving.preset_files import PresetError
from keras_nlp.saving.preset_files import link_target
from keras_nlp.saving.preset_files import strip_trailing_separators

try:
    import fcntl
except ImportError:  # Windows: no flock; see `_lock`.
    fcntl = None

# A Hugging Face checkpoint's weights (`keras_nlp.saving.huggingface`).
HUGGINGFACE_FILES = (SAFETENSORS_FILE, SAFETENSORS_INDEX)
# The files `save_to_preset` writes; anything else in a preset is kept.
BACKBONE_FILES = (
    CONFIG_FILE,
    METADATA_FILE,
    WEIGHTS_FILE,
    SHARDED_WEIGHTS_FILE,
)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIRECTORY_FLAGS = (
    os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
)
_HAVE_DIR_FD = (
    bool(_NOFOLLOW)
    and os.open in os.supports_dir_fd
    and os.link in os.supports_dir_fd
    and os.mkdir in os.supports_dir_fd
    and os.readlink in os.supports_dir_fd
    and os.symlink in os.supports_dir_fd
    and os.scandir in os.supports_fd
    and os.chmod in os.supports_fd
    and os.utime in os.supports_fd
)


class PresetBusyError(RuntimeError):
    """Another save to the same preset directory is in progress."""


def is_backbone_file(name):
    """Whether `save_to_preset` writes (and so replaces) a file so named."""
    return (
        name in BACKBONE_FILES
        or name in HUGGINGFACE_FILES
        or bool(SHARD_FILE.fullmatch(name))
        or bool(SAFETENSORS_SHARD.fullmatch(name))
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


def _carry_over(target, staging, keep):
    """Carries the entries of the old preset `target` that `keep` accepts
    into `staging`: hard links where possible, else copies.

    Every entry is opened relative to its folder's descriptor and never
    through a symbolic link: a link is carried as a link (nothing is read
    through it), and a folder swapped for a link meanwhile fails the save
    instead of bringing outside files in.
    """
    if not _HAVE_DIR_FD:
        _carry_over_paths(target, staging, keep)
        return
    try:
        source = os.open(target, _DIRECTORY_FLAGS)
    except OSError as error:
        raise os_error_naming(error, target) from error
    try:
        destination = os.open(staging, _DIRECTORY_FLAGS)
        try:
            _carry_over_fds(source, destination, target, keep)
        finally:
            os.close(destination)
    finally:
        os.close(source)


def _carry_over_fds(source, destination, where, keep=None):
    with os.scandir(source) as entries:
        names = [entry.name for entry in entries]
    for name in names:
        if keep is not None and not keep(name):
            continue
        path = os.path.join(where, name)
        try:
            _carry_entry(source, destination, name, path)
        except OSError as error:
            named = error.filename
            if isinstance(named, str) and (
                named == path or named.startswith(path + os.sep)
            ):
                raise
            raise os_error_naming(error, path) from error


def _carry_entry(source, destination, name, path):
    mode = os.stat(name, dir_fd=source, follow_symlinks=False).st_mode
    if stat.S_ISDIR(mode):
        folder = os.open(name, _DIRECTORY_FLAGS, dir_fd=source)
        try:
            os.mkdir(name, 0o700, dir_fd=destination)
            copy = os.open(name, _DIRECTORY_FLAGS, dir_fd=destination)
            try:
                _carry_over_fds(folder, copy, path)
                _copy_stat(os.fstat(folder), copy)
            finally:
                os.close(copy)
        finally:
            os.close(folder)
        return
    try:
        # A link is carried as a link: nothing is read through it.
        os.link(
            name,
            name,
            src_dir_fd=source,
            dst_dir_fd=destination,
            follow_symlinks=False,
        )
        return
    except OSError:
        if not (stat.S_ISLNK(mode) or stat.S_ISREG(mode)):
            raise
    if stat.S_ISLNK(mode):
        target = os.readlink(name, dir_fd=source)
        os.symlink(target, name, dir_fd=destination)
        return
    _copy_file(source, destination, name)


def _copy_file(source, destination, name):
    """Copies the regular file `name` between two folder descriptors."""
    flags = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK
    reader = os.open(name, flags, dir_fd=source)
    try:
        status = os.fstat(reader)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        os.set_blocking(reader, True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
        writer = os.open(name, flags, 0o600, dir_fd=destination)
        with os.fdopen(writer, "wb") as copy:
            with os.fdopen(os.dup(reader), "rb") as original:
                shutil.copyfileobj(original, copy)
            copy.flush()
            _copy_stat(status, copy.fileno())
    finally:
        os.close(reader)


def _copy_stat(status, fd):
    """Gives the file or folder `fd` the mode and times of `status`."""
    os.chmod(fd, stat.S_IMODE(status.st_mode))
    os.utime(fd, ns=(status.st_atime_ns, status.st_mtime_ns))


def _carry_over_paths(source, destination, keep=None):
    """`_carry_over` where the OS has no directory descriptors."""
    for entry in os.scandir(source):
        if keep is not None and not keep(entry.name):
            continue
        target = os.path.join(destination, entry.name)
        if entry.is_dir(follow_symlinks=False):
            os.mkdir(target)
            shutil.copystat(entry.path, target, follow_symlinks=False)
            _carry_over_paths(entry.path, target)
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
            raise os_error_naming(error, path) from error
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
    target = strip_trailing_separators(target)
    if os.path.islink(target):
        raise ValueError(
            f"save_to_preset does not write through symbolic links, and "
            f"{target} is one (to {link_target(target)!r}). Pass the "
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
                fsync_path(entry.path)
            if os.path.isdir(target) and not os.path.islink(target):
                # A tokenizer or a README saved next to the backbone stays.
                _carry_over(
                    target, staging, keep=lambda n: not is_backbone_file(n)
                )
            fsync_path(staging)
            old = _swap_in(staging, target, parent, name)
            staging = None
            # The new preset is in place: nothing after this may fail the
            # save.
            with contextlib.suppress(OSError):
                fsync_path(parent)
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


# === One file ===


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
