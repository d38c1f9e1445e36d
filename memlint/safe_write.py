"""The one way memlint writes a file into the user's repository: atomic, locked, in the root.

    safe_write.edit(path, change, root=write_root(os.getcwd()))

`edit` takes a lock beside the target (`.NAME.memlint-lock`, removed afterwards), reads the
current text under it (None when the file does not exist yet), passes it to `change`, and writes
what `change` returns to a temporary file in the same folder, which is flushed, fsync'ed and then
renamed over the target (`os.replace`), so that a reader or a crash sees the old file or the new
one, never half of either, and parallel writers serialize instead of losing each other's edits.

Refused with a WriteError (exit 2, one line): a target that is a symbolic link, a directory, a
special file, read-only, larger than the read limit or not UTF-8; a folder that does not exist;
and any target outside the root (the git work tree of the working directory, never above it)
unless `allow_outside_root`. `keep_line_endings` gives new text the old file's CRLF endings.
"""
from __future__ import annotations

import errno
import os
import stat
import tempfile
import time
from typing import Callable, Optional

try:
    import fcntl
except ImportError:  # no flock (Windows): the lock file's existence is the lock
    fcntl = None  # type: ignore[assignment]

from memlint.errors import MemlintError
from memlint.escape import one_line
from memlint.loaders import inside

MAX_EDIT_BYTES = 4 * 1024 * 1024   # the read limit of configs (loaders.MAX_FILE_BYTES)
LOCK_TIMEOUT = 30.0                # seconds a writer waits for another to finish


class WriteError(MemlintError):
    """The file cannot be written safely; the message says why, in one line."""


def write_root(start: str) -> str:
    """The folder writes stay inside: the nearest folder at or above `start` with a .git (the
    work tree), else the nearest with a pyproject.toml, else `start` itself."""
    current = os.path.realpath(start)
    probe, project = current, None
    while True:
        if os.path.exists(os.path.join(probe, ".git")):
            return probe
        if project is None and os.path.isfile(os.path.join(probe, "pyproject.toml")):
            project = probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return project or current
        probe = parent


def check_target(path: str, root: str, allow_outside_root: bool = False) -> str:
    """The absolute path to write, after every refusal above; raises WriteError."""
    shown = _shown(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise WriteError(f"{shown}: folder {_shown(folder)} does not exist; not written")
    real_folder = os.path.realpath(folder)
    target = os.path.join(real_folder, os.path.basename(path))
    if not allow_outside_root and not inside(real_folder, root):
        raise WriteError(f"{shown} is outside the repository root {_shown(root)}; not written "
                         "(pass --allow-outside-root to write there)")
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise WriteError(f"{shown}: cannot write: {exc.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise WriteError(f"{shown} is a symbolic link; not written (name the file it points "
                         "to, if that is the one meant)")
    if stat.S_ISDIR(info.st_mode):
        raise WriteError(f"{shown} is a directory; not written")
    if not stat.S_ISREG(info.st_mode):
        raise WriteError(f"{shown} is not a regular file; not written")
    if not info.st_mode & 0o222 or not os.access(target, os.W_OK):
        raise WriteError(f"{shown} is read-only; not written")
    return target


def _shown(path: str) -> str:
    return one_line(path) or path


def _read(target: str, shown: str, max_bytes: int) -> Optional[str]:
    try:
        fd = os.open(target, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise WriteError(f"{shown}: cannot read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise WriteError(f"{shown} is not a regular file; not written")
        raw = handle.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise WriteError(f"{shown} is over {max_bytes} bytes; not edited")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise WriteError(f"{shown}:{line}: not valid UTF-8 (byte 0x{raw[exc.start]:02x}); "
                         "not edited") from None


def keep_line_endings(old: Optional[str], new: str) -> str:
    """`new` with CRLF line ends where every line of `old` ends so (a Windows checkout)."""
    if not old or "\r\n" not in old or old.count("\n") != old.count("\r\n"):
        return new
    return new.replace("\r\n", "\n").replace("\n", "\r\n")


class _Lock:
    """An exclusive lock on `.NAME.memlint-lock` beside the target, removed on release. After
    the lock is taken the file is checked to be the one at the path, so a writer that took the
    lock on a file another writer just removed tries again instead of sharing the lock."""

    def __init__(self, target: str, shown: str, timeout: float = LOCK_TIMEOUT):
        folder, name = os.path.split(target)
        self.path = os.path.join(folder, f".{name}.memlint-lock")
        self.shown, self.timeout, self.fd = shown, timeout, None

    def __enter__(self) -> "_Lock":
        deadline = time.monotonic() + self.timeout
        while True:
            if self._try():
                return self
            if time.monotonic() > deadline:
                raise WriteError(f"{self.shown}: another writer holds {_shown(self.path)}; not "
                                 f"written (remove the lock file if no memlint is running)")
            time.sleep(0.02)

    def _try(self) -> bool:
        if fcntl is None:
            return self._try_exclusive()
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except OSError as exc:
            raise WriteError(f"{self.shown}: cannot create the lock file: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return False
            raise WriteError(f"{self.shown}: cannot lock: {exc.strerror}") from None
        try:
            same = os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # removed (and maybe re-created) by the writer before us
            os.close(fd)
            return False
        self.fd = fd
        return True

    def _try_exclusive(self) -> bool:
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        except OSError as exc:
            raise WriteError(f"{self.shown}: cannot create the lock file: {exc.strerror}") from None
        return True

    def __exit__(self, *_exc) -> None:
        try:
            os.unlink(self.path)   # while still holding it: see _try
        except OSError:
            pass
        os.close(self.fd)


def _mode_for_new_file() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _replace(target: str, data: bytes, shown: str) -> None:
    folder, name = os.path.split(target)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = _mode_for_new_file()
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".memlint-tmp", dir=folder)
    except OSError as exc:
        raise WriteError(f"{shown}: cannot write in its folder: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except OSError as exc:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise WriteError(f"{shown}: cannot write: {exc.strerror}") from None
    _sync_folder(folder)


def _sync_folder(folder: str) -> None:
    """The rename itself is durable once the folder is synced (where the system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def edit(path: str, change: Callable[[Optional[str]], str], root: str,
         allow_outside_root: bool = False, timeout: float = LOCK_TIMEOUT,
         max_bytes: int = MAX_EDIT_BYTES) -> str:
    """Apply `change` (old text or None -> new text) to the file at `path`; returns the text
    written. Every refusal is a WriteError; `change` may raise one too (nothing is written)."""
    shown = _shown(path)
    target = check_target(path, root, allow_outside_root)
    with _Lock(target, shown, timeout):
        target = check_target(target, root, allow_outside_root)  # again, now that we hold it
        old = _read(target, shown, max_bytes)
        new = change(old)
        _replace(target, new.encode("utf-8"), shown)
    return new


def write(path: str, text: str, root: str, allow_outside_root: bool = False) -> None:
    """Replace (or create) the file at `path` with `text`, as `edit` does."""
    edit(path, lambda _old: text, root, allow_outside_root)
