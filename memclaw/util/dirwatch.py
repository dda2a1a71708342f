"""Has anything in a folder changed since it was last scanned? One inotify watch per folder (Linux), so that a check
costs one non-blocking read instead of an lstat of every file in it.

Used for the archive's day files (memclaw.index.scopes): recall checks before each search whether any memory file
changed, and a scope with a thousand days of archive would otherwise pay a thousand lstat calls (~2-5 ms) every time.

The order makes it exact: `begin()` sets the watch up *before* the caller scans the folder, so a change made during
or after the scan is an event that the next `changed()` reports. Any event counts (a file written, created, deleted,
renamed, its attributes; the folder itself deleted or moved; the event queue overflowing): the caller scans again,
after `begin()` again. Where a watch cannot be had (not Linux, no inotify, a network or FUSE filesystem whose remote
changes inotify never sees, the watch limit reached), `changed()` is always True: the caller scans every time, as
without this module.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys
from pathlib import Path

_MASK = (
    0x00000002  # IN_MODIFY
    | 0x00000004  # IN_ATTRIB
    | 0x00000008  # IN_CLOSE_WRITE
    | 0x00000040  # IN_MOVED_FROM
    | 0x00000080  # IN_MOVED_TO
    | 0x00000100  # IN_CREATE
    | 0x00000200  # IN_DELETE
    | 0x00000400  # IN_DELETE_SELF
    | 0x00000800  # IN_MOVE_SELF
    | 0x01000000  # IN_ONLYDIR
    | 0x02000000  # IN_DONT_FOLLOW
)
_REMOTE = {0x6969, 0x517B, 0xFF534D42, 0xFE534D42, 0x65735546, 0x01021997, 0x5346414F, 0x00C36400, 0x564C}
"""statfs magic numbers of filesystems whose changes may come from elsewhere: NFS, SMB, CIFS, SMB2, FUSE, 9P, AFS,
Ceph, NCP."""


class _StatFs(ctypes.Structure):
    _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_byte * 256)]


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        lib.inotify_init1, lib.inotify_add_watch, lib.statfs  # noqa: B018 - present, else no watch
    except (OSError, AttributeError):
        return None
    return lib


_LIB = _libc()


class DirWatch:
    """Changes in one folder (see the module docstring). Not thread-safe: the caller holds a lock."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def begin(self) -> None:
        """(Re)arm the watch, before the caller scans the folder. A folder that cannot be watched is left unwatched."""
        self.close()
        if _LIB is None or not _local(self.path):
            return
        fd = _LIB.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return
        if _LIB.inotify_add_watch(fd, os.fsencode(self.path), _MASK) < 0:
            os.close(fd)
            return
        self._fd = fd

    def changed(self) -> bool:
        """Whether the folder may have changed since `begin()` (True when it is not watched)."""
        if self._fd is None:
            return True
        try:
            os.read(self._fd, 65536)
        except BlockingIOError:
            return False
        except OSError:
            pass
        return True

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.close()


def _local(path: Path) -> bool:
    """The folder exists on a filesystem whose every change this machine's kernel sees."""
    buf = _StatFs()
    if _LIB is None or _LIB.statfs(os.fsencode(path), ctypes.byref(buf)) != 0:
        return False
    return (buf.f_type & 0xFFFFFFFF) not in _REMOTE
