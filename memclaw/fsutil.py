"""Durable file replacement: the one helper every writer of memclaw's files uses.

`replace_atomically(path, data)` writes a temp file in the same folder, fsyncs it, gives it the mode of the file it
replaces, renames it over `path` and fsyncs the folder: a reader (or a crash) sees the old content or the new one,
never a torn file. Errors are plain OSError; each caller turns them into its own message.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


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


def replace_atomically(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace `path` with `data` atomically and durably; `mode` defaults to the replaced file's (else 0o644)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            mode = 0o644
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
