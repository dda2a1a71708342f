"""What kind of thing stands at a path, and the error for a path of memclaw's index that holds the wrong kind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from memclaw.errors import DerivedIndexError


def kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def odd_path_error(path: Path, expected: str, root: Path) -> DerivedIndexError:
    """The error for `path` holding something other than the `expected` kind ("folder" or "file")."""
    try:
        what = kind_of(os.stat(path).st_mode)
    except OSError:
        what = "something else"
    if Path(path) == Path(root):
        return DerivedIndexError(
            f"the index folder {path} is {what}, not a folder: move it out of the way, or set memory.index_dir to a "
            "folder memclaw may use; memclaw then builds the index there from the Markdown"
        )
    return DerivedIndexError(
        f"{path} is {what}, where memclaw keeps a {expected} of its index: move it out of the way; memclaw then "
        "rebuilds the index from the Markdown"
    )
