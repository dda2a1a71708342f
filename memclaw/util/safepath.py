"""No symlink inside the memory folder is followed: the one check every reader and writer of memory files uses.

A scope's files live in `memory/` (the owner) and `memory/people/<sender>/` (everyone else). A symlink anywhere
below `memory/` could make one scope read or write another's memory. `ln -s .. memory/people/discord%3A6666` would
give that sender the owner's facts. So a path with a symlink below its base is refused (MemoryFileError, exit 3)
before anything is read or written through it. Files are opened with O_NOFOLLOW where the platform has it, so a
link put in place after the check is refused too. The workspace and its
`memory/` folder themselves may be symlinks (to keep them on another disk): every scope is below them alike.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from memclaw.errors import MemoryFileError
from memclaw.util.pathkind import kind_of

O_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
"""Add to os.open's flags: opening a symlink fails with ELOOP instead of following it (0 where unsupported)."""


def symlink_below(path: Path, base: Path) -> Path | None:
    """The first component of `path` below `base` that is a symlink (by lstat), or None. `path` must be `base` or
    lexically below it; components that do not exist (yet) are not links. Errors other than a missing component
    are left to the operation that follows (it names the file and the fix)."""
    cur = Path(base)
    for part in Path(path).relative_to(base).parts:
        cur = cur / part
        try:
            st = os.lstat(cur)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return cur
    return None


def refusal(link: Path, what: str = "memory") -> str:
    """The one message for a refused symlink: which link, why, and the fix."""
    return (
        f"{link} is a symlink: memclaw does not follow symlinks in its {what} folder (a link could reach another "
        "person's memory or a file outside the workspace); nothing was read or written through it: replace the link "
        "with the real folder or file, or remove it"
    )


def refuse_symlinks(path: Path, base: Path, what: str = "memory") -> None:
    """Raise MemoryFileError if any component of `path` below `base` is a symlink."""
    link = symlink_below(path, base)
    if link is not None:
        raise MemoryFileError(refusal(link, what))


def is_symlink_error(e: OSError, path: Path) -> bool:
    """Did an O_NOFOLLOW open of `path` fail because `path` is a symlink (ELOOP, or EMLINK on some BSDs)?"""
    if e.errno not in (errno.ELOOP, errno.EMLINK):
        return False
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


class NotRegularFileError(OSError):
    """A FIFO, a socket or a device stands where memclaw reads or writes a regular file (opening or reading a FIFO
    would wait forever for a writer). Its strerror says what stands there."""


def not_regular(path: Path, mode: int) -> NotRegularFileError:
    why = f"it is {kind_of(mode)}, not a regular file (move it out of the way)"
    return NotRegularFileError(errno.EINVAL, why, str(path))


def open_regular(path: Path, flags: int, mode: int = 0o644, *, follow: bool = False) -> int:
    """The one place memclaw opens a file it reads or writes: a regular file only, never a FIFO, socket or device.

    The open is non-blocking (so a FIFO cannot hang it), then fstat checks the opened file itself (no race between
    check and open), then the descriptor is made blocking again. NotRegularFileError for anything but a regular file;
    IsADirectoryError for a folder. Unless `follow`, a symlink as the last component is refused (ELOOP)."""
    if not follow and not O_NOFOLLOW and os.path.islink(path):  # pragma: no cover - platforms without O_NOFOLLOW
        raise OSError(errno.ELOOP, "is a symlink", str(path))
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | (0 if follow else O_NOFOLLOW), mode)
    except OSError as e:
        # ENXIO: a FIFO opened for writing with no reader, or a socket
        if e.errno == errno.ENXIO:
            try:
                st_mode = os.stat(path).st_mode
            except OSError:
                raise e from None
            raise not_regular(Path(path), st_mode) from e
        raise
    try:
        st_mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(st_mode):
            raise not_regular(Path(path), st_mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_nofollow(path: Path, flags: int, mode: int = 0o644) -> int:
    """`open_regular` that refuses a symlink as the last component (OSError ELOOP; see `is_symlink_error`)."""
    return open_regular(path, flags, mode)


def read_regular(path: Path, limit: int = -1, *, follow: bool = False) -> bytes:
    """The bytes of the regular file `path` (at most `limit` if >= 0), through a symlink only if `follow`. OSError as
    `open_regular` raises it (FileNotFoundError, ELOOP for a symlink, IsADirectoryError, NotRegularFileError...)."""
    fd = open_regular(path, os.O_RDONLY, follow=follow)
    with os.fdopen(fd, "rb") as f:
        return f.read() if limit < 0 else f.read(limit)


def read_nofollow(path: Path, limit: int = -1) -> bytes:
    """The bytes of the regular file `path` (at most `limit` if >= 0), never through a symlink."""
    return read_regular(path, limit)
