"""No symlink inside the memory folder is followed: the one check every reader and writer of memory files uses.

A scope's files live in `memory/` (the owner) and `memory/people/<sender>/` (everyone else). A symlink anywhere
below `memory/` (`memory/people`, a scope folder, `MEMORY.md`, `HISTORY.md`, a lock file) could make one scope read
or write another's memory (`ln -s .. memory/people/discord%3A6666` gives that sender the owner's facts), or make a
`memory add` read a file outside the workspace and replace the link with a copy. So a path with a symlink below its
base is refused (MemoryFileError, exit 3) before anything is read or written through it, and files are opened with
O_NOFOLLOW where the platform has it, so a link put in place after the check is refused too. The workspace and its
`memory/` folder themselves may be symlinks (to keep them on another disk): every scope is below them alike.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from memclaw.errors import MemoryFileError

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


def open_nofollow(path: Path, flags: int, mode: int = 0o644) -> int:
    """os.open that refuses a symlink as the last component (OSError ELOOP; see `is_symlink_error`)."""
    if not O_NOFOLLOW and os.path.islink(path):  # pragma: no cover - platforms without O_NOFOLLOW
        raise OSError(errno.ELOOP, "is a symlink", str(path))
    return os.open(path, flags | O_NOFOLLOW, mode)


def read_nofollow(path: Path, limit: int = -1) -> bytes:
    """The bytes of the regular file `path` (at most `limit` if >= 0), never through a symlink. OSError as os.open
    raises it (FileNotFoundError, ELOOP for a symlink, IsADirectoryError...)."""
    fd = open_nofollow(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        return f.read() if limit < 0 else f.read(limit)
