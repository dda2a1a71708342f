"""Values derived from files (a bootstrap file's text, a parsed SKILL.md), recomputed only when the file changes.

A file's signature is its (mtime_ns, size); `FileCache.get(path)` returns the cached value while the signature is
unchanged, else calls the loader again. A loader returning None (the file could not be read) is not cached, so
fixing the file's permissions is noticed at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")


class FileCache(Generic[T]):
    def __init__(self, load: Callable[[Path], T | None]) -> None:
        self._load = load
        self._entries: dict[Path, tuple[tuple[int, int], T]] = {}
        self._lock = threading.Lock()

    def get(self, path: Path) -> T | None:
        """The value for `path`; None when it is absent or the loader could not produce one."""
        try:
            st = path.stat()
        except OSError:
            return None
        sig = (st.st_mtime_ns, st.st_size)
        hit = self._entries.get(path)
        if hit is not None and hit[0] == sig:
            return hit[1]
        value = self._load(path)
        if value is not None:
            with self._lock:
                self._entries[path] = (sig, value)
        return value
