"""What may stand at the paths of an index folder, and what to say when something else does.

memclaw makes each path of its index (memclaw.index.layout) as a folder or a file. A path of the other kind (a folder
where the state file goes, a file named `scopes`, `memory.index_dir` pointing at `/etc/passwd`) is not memclaw's
to replace: `check_layout` refuses it in one line naming the path and the fix (exit 3), before anything is read or
written. (Advice to delete the index folder is given only for one memclaw made: errors.rebuild_hint.)
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from memclaw.errors import IndexError_
from memclaw.util.pathkind import odd_path_error

if TYPE_CHECKING:
    from memclaw.index.layout import IndexLayout


def check_layout(layout: IndexLayout, scope: str | None = None, *, embedded: bool = True) -> None:
    """Raise IndexError_ if a path of the index (of `scope`'s part too, if given) exists as the wrong kind. A missing
    path is fine (made when needed); PermissionError passes through (the CLI says it in one line)."""
    expect: list[tuple[Path, str]] = [(layout.root, "folder"), (layout.manifest, "file"), (layout.lock_file, "file"),
                                      (layout.root / "scopes", "folder")]  # fmt: skip
    if embedded:
        expect.append((layout.chroma_dir, "folder"))
    if scope is not None:
        expect += [(layout.scope_dir(scope), "folder"), (layout.state_file(scope), "file"),
                   (layout.dirty_file(scope), "file")]  # fmt: skip
    for path, kind in expect:
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):  # absent (or under a parent reported on its own)
            continue
        ok = stat.S_ISDIR(st.st_mode) if kind == "folder" else stat.S_ISREG(st.st_mode)
        if not ok:
            raise odd_path_error(path, kind, layout.root)


def regular_file(path: Path, root: Path) -> bool:
    """Whether the file memclaw keeps at `path` (in the index at `root`) is there; False: not yet. Raises IndexError_
    when something else stands there, or above it; PermissionError passes through."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except NotADirectoryError as e:
        for parent in reversed(Path(path).parents):
            if parent.exists() and not parent.is_dir():
                raise odd_path_error(parent, "folder", root) from e
        raise IndexError_(f"cannot use {path}: a folder above it is not a folder") from e
    if not stat.S_ISREG(st.st_mode):
        raise odd_path_error(path, "file", root)
    return True
