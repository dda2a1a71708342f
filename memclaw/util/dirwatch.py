"""Has anything in a folder changed since it was last scanned? One inotify watch per folder (Linux; one inotify
instance per process for all of them), so that a check costs one non-blocking read instead of an lstat of every file
in it.

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
import struct
import sys
import threading
from pathlib import Path

_MASK = (
    # IN_MODIFY
    0x00000002
    # IN_ATTRIB
    | 0x00000004
    # IN_CLOSE_WRITE
    | 0x00000008
    # IN_MOVED_FROM
    | 0x00000040
    # IN_MOVED_TO
    | 0x00000080
    # IN_CREATE
    | 0x00000100
    # IN_DELETE
    | 0x00000200
    # IN_DELETE_SELF
    | 0x00000400
    # IN_MOVE_SELF
    | 0x00000800
    # IN_ONLYDIR
    | 0x01000000
    # IN_DONT_FOLLOW
    | 0x02000000
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
        lib.inotify_init1, lib.inotify_add_watch, lib.inotify_rm_watch, lib.statfs  # noqa: B018 - present, else no watch
    except (OSError, AttributeError):
        return None
    return lib


_LIB = _libc()


_IN_Q_OVERFLOW = 0x00004000
# IN_DELETE_SELF, IN_MOVE_SELF, IN_IGNORED: the folder is not watched
_IN_GONE = 0x00000400 | 0x00000800 | 0x00008000
# Struct inotify_event: wd, mask, cookie, len (then len bytes of name)
_EVENT = struct.Struct("iIII")


class _Inotify:
    """The process's one inotify instance, shared by every DirWatch: the kernel allows a user ~128 instances (all
    its processes together), and a gateway watches one archive folder per sender. Events are read by whichever
    watch asks and marked on every watch of their folder."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.fd: int | None = None
        self.pid = 0
        self.by_wd: dict[int, set[DirWatch]] = {}

    def watch(self, w: DirWatch) -> int | None:
        """A watch descriptor for `w`'s folder, or None where it cannot be had (no folder, the limits reached)."""
        if _LIB is None:
            return None
        # A forked child does not share its parent's watches
        if self.fd is None or self.pid != os.getpid():
            # The parent's instance, inherited: this process's copy of it
            if self.fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self.fd)
                self.fd = None
            fd = _LIB.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd < 0:
                return None
            self.fd, self.pid, self.by_wd = fd, os.getpid(), {}
        wd = _LIB.inotify_add_watch(self.fd, os.fsencode(w.path), _MASK)
        if wd < 0:
            return None
        self.by_wd.setdefault(wd, set()).add(w)
        return wd

    def unwatch(self, w: DirWatch, wd: int) -> None:
        ws = self.by_wd.get(wd)
        if ws is None or self.pid != os.getpid():
            return
        ws.discard(w)
        if not ws:
            del self.by_wd[wd]
            _LIB.inotify_rm_watch(self.fd, wd)  # type: ignore[union-attr]

    def drain(self) -> None:
        """Read every pending event; mark the watches of its folder changed, and unwatched when the folder is gone."""
        if self.fd is None or self.pid != os.getpid():
            return
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                buf = b""
            # Cannot read: every watch scans from now on
            if not buf:
                for ws in self.by_wd.values():
                    for w in ws:
                        w.forget_watch()
                self.by_wd = {}
                return
            at = 0
            while at + _EVENT.size <= len(buf):
                wd, mask, _cookie, n = _EVENT.unpack_from(buf, at)
                at += _EVENT.size + n
                hit = [w for ws in self.by_wd.values() for w in ws] if mask & _IN_Q_OVERFLOW else self.by_wd.get(wd, ())
                for w in list(hit):
                    w.dirty = True
                if mask & _IN_GONE and wd in self.by_wd:
                    for w in self.by_wd.pop(wd):
                        w.forget_watch()


_INOTIFY = _Inotify()


class DirWatch:
    """Changes in one folder (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.dirty = True
        self._wd: int | None = None
        # The process whose instance `_wd` belongs to (after a fork, the child's watch is not it)
        self._pid = 0

    def _watched(self) -> bool:
        return self._wd is not None and self._pid == os.getpid()

    def begin(self) -> None:
        """(Re)arm the watch, before the caller scans the folder. A folder that cannot be watched is left unwatched."""
        with _INOTIFY.lock:
            # What happened before this scan
            _INOTIFY.drain()
            if not self._watched() and _local(self.path):
                self._wd, self._pid = _INOTIFY.watch(self), os.getpid()
            self.dirty = False

    def changed(self) -> bool:
        """Whether the folder may have changed since `begin()` (True when it is not watched)."""
        with _INOTIFY.lock:
            _INOTIFY.drain()
            return not self._watched() or self.dirty

    def forget_watch(self) -> None:
        """(memclaw.util.dirwatch's own: the folder is no longer watched; `begin()` watches it again.)"""
        self._wd = None
        self.dirty = True

    def close(self) -> None:
        with _INOTIFY.lock:
            if self._watched():
                _INOTIFY.unwatch(self, self._wd)  # type: ignore[arg-type]
            self.forget_watch()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _local(path: Path) -> bool:
    """The folder exists on a filesystem whose every change this machine's kernel sees."""
    buf = _StatFs()
    if _LIB is None or _LIB.statfs(os.fsencode(path), ctypes.byref(buf)) != 0:
        return False
    return (buf.f_type & 0xFFFFFFFF) not in _REMOTE
