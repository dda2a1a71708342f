"""Durable file replacement and inter-process file locks: the helpers every writer of memclaw's files uses.

`replace_atomically(path, data)` writes a temp file in the same folder, fsyncs it, gives it the old file's mode,
renames it over `path` and fsyncs the folder. A reader or a crash sees the old content or the new one, never a
torn file. It never replaces a symlink, nor a file made read-only (`check_writable`, for root too).
`file_lock(path)` holds an flock on a lock file (never through a symlink) for a `with` block. Errors are plain
OSError; each caller turns them into its own message.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from memclaw.util.safepath import open_nofollow

STALE_TEMP_S = 15 * 60
"""A temp file of `replace_atomically` this old was left by a killed writer (a live one is seconds old)."""


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in `directory` durable (best effort: not every filesystem allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


class ReadOnlyFileError(PermissionError):
    """The file's mode says this process may not write it (`check_writable`): it is not replaced or appended to."""


def check_writable(st: os.stat_result, path: Path) -> None:
    """Raise ReadOnlyFileError (EACCES) if the mode of the file `st` describes denies this process writing it.

    The owner's write bit counts for its owner, and for root too: a file made read-only is meant to stay as it is.
    The group's bit counts for a member of its group, the others' bit for anyone else."""
    if not hasattr(os, "geteuid"):  # pragma: no cover - not POSIX
        return
    euid = os.geteuid()
    if euid in (0, st.st_uid):
        bit = stat.S_IWUSR
    elif st.st_gid == os.getegid() or st.st_gid in os.getgroups():
        bit = stat.S_IWGRP
    else:
        bit = stat.S_IWOTH
    if not st.st_mode & bit:
        raise ReadOnlyFileError(errno.EACCES, "Permission denied (the file is read-only)", str(path))


def replace_atomically(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace `path` with `data` atomically and durably; `mode` defaults to the replaced file's (else 0o644).

    A symlink at `path` is neither followed nor replaced: OSError ELOOP (see memclaw.util.safepath.is_symlink_error).
    A file this process may not write by its mode is not replaced either (ReadOnlyFileError, see `check_writable`):
    the rename would otherwise replace it as if it were writable."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise OSError(errno.ELOOP, "is a symlink (not replaced)", str(path))
    if st is not None:
        check_writable(st, path)
    if mode is None:
        mode = stat.S_IMODE(st.st_mode) if st is not None else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
    remove_stale_temps(path)


def remove_stale_temps(path: Path, older_than_s: float = STALE_TEMP_S) -> list[Path]:
    """Delete the temp files a killed writer of `path` left beside it (`.NAME.*.tmp`, older than the threshold;
    a write in progress elsewhere is younger and kept). Best effort; returns what was removed."""
    removed = []
    cutoff = time.time() - older_than_s
    for tmp in Path(path).parent.glob(f".{glob.escape(Path(path).name)}.*.tmp"):
        with contextlib.suppress(OSError):
            if tmp.lstat().st_mtime < cutoff:
                tmp.unlink()
                removed.append(tmp)
    return removed


@contextlib.contextmanager
def file_lock(path: Path, *, shared: bool = False, wait: bool = True) -> Iterator[None]:
    """Hold an inter-process lock (flock) on the lock file `path` for the `with` block: exclusive, or `shared`
    (many readers, no writer). The file (and its folder) is created if missing, mode 0o600; a symlink at `path` is
    refused (OSError ELOOP, see memclaw.util.safepath.is_symlink_error), never followed. Blocks until acquired, or
    with `wait=False` raises BlockingIOError at once when another holder has it."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_nofollow(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB))
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
