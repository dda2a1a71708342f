"""The CLI's last resort for a PermissionError: one line naming the path and the fix, as the MemclawError the path
calls for. Kept out of memclaw.errors, which imports nothing of memclaw (so every module can use it without a cycle).
"""

from __future__ import annotations

from pathlib import Path

from memclaw.errors import DerivedIndexError, MemclawError, MemoryFileError, WorkspaceError, rebuild_hint
from memclaw.workspace import INDEX_DIRNAME


def from_permission_error(e: PermissionError) -> MemclawError:
    """The CLI's last resort for a PermissionError that no code path said in its own words: one line, path and fix.

    It is an DerivedIndexError (exit 3) inside the index folder, a MemoryFileError (3) inside memory/, else a
    WorkspaceError (2)."""
    path = e.filename or "a file"
    parts = Path(str(path)).parts
    if INDEX_DIRNAME in parts:
        root = Path(*parts[: parts.index(INDEX_DIRNAME) + 1])
        hint = rebuild_hint(root)
        return DerivedIndexError(f"cannot use the index: {path}: permission denied; fix its permissions{hint}")
    cls = MemoryFileError if "memory" in parts else WorkspaceError
    return cls(f"cannot access {path}: permission denied; fix its permissions")
