"""What the owner forgot does not come back through the archive: at recall time, an archived turn that restates a
forgotten memory (memclaw.service.forgotten.restates: most of its content words, or most of its distinctive names
and numbers, distinctive by how few memories of the scope hold them now) and was said before it was forgotten is left
out, as a hit and from every excerpt's window (the window stops short of it). A turn said
after the forget is news, and kept, as consolidation keeps it.

The forgotten file (`sessions/forgotten.jsonl`) is read again only when it changed (its size and mtime).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable
from pathlib import Path

from memclaw.markdown.units import MemoryUnit
from memclaw.recall.results import RecallHit, RecallResult
from memclaw.service.forgotten import FORGOTTEN_FILE, DocFreq, ForgottenKey, ForgottenMemory, key_of, load, restates

Tokenize = Callable[[str], list[str]]
Keys = list[tuple[ForgottenMemory, ForgottenKey]]


class ForgottenFilter:
    """The recall-time rule above, for one workspace's sessions folder."""

    def __init__(self, sessions_dir: Path, tokenize: Tokenize, doc_freq: Callable[[str], DocFreq]) -> None:
        """`doc_freq(scope)`: how many memories of that scope hold a token, as its index holds them now."""
        self.path = Path(sessions_dir) / FORGOTTEN_FILE
        self.tokenize = tokenize
        self.doc_freq = doc_freq
        self._lock = threading.Lock()
        self._sig: tuple[int, int] | None = None
        self._entries: Keys = []

    def _load(self) -> Keys:
        try:
            st = os.stat(self.path)
            sig = (st.st_mtime_ns, st.st_size)
        except OSError:
            sig = None
        with self._lock:
            if sig != self._sig:
                entries = load(self.path) if sig is not None else []
                self._entries = [(f, key_of(f.text, self.tokenize)) for f in entries]
                self._sig = sig
            return self._entries

    def hides(self, u: MemoryUnit, keys: Keys) -> bool:
        """Whether the archived turn `u` restates one of `keys` forgotten after it was said."""
        if u.kind != "archive" or not keys:
            return False
        said = u.timestamp.astimezone() if u.timestamp is not None else None  # naive local time, as written
        words = set(self.tokenize(u.text.split(": ", 1)[-1]))
        return any((said is None or said <= f.at) and restates(words, key) for f, key in keys)

    def _keys(self, scope: str) -> Keys:
        """The keys of the memories forgotten in `scope`, their names distinctive in it now."""
        entries = [(f, key) for f, key in self._load() if f.scope == scope]
        if not entries:
            return []
        doc_freq = self.doc_freq(scope)
        return [(f, key.distinctive(doc_freq)) for f, key in entries]

    def apply(self, result: RecallResult) -> RecallResult:
        """`result` without the archived turns the owner's forgets hide (hits and window turns)."""
        if not any(h.unit.kind == "archive" for h in result.hits):
            return result
        keys = self._keys(result.scope)
        if not keys:
            return result
        kept: list[RecallHit] = []
        for h in result.hits:
            if self.hides(h.unit, keys):
                continue
            if h.excerpt:
                h = dataclasses.replace(h, excerpt=_window_without(h, lambda t: self.hides(t, keys)))
            kept.append(h)
        result.hits = kept
        return result


def _window_without(h: RecallHit, hidden: Callable[[MemoryUnit], bool]) -> tuple[MemoryUnit, ...]:
    """The run of turns around the hit's own turn that holds no hidden turn."""
    turns = list(h.excerpt)
    at = next(n for n, t in enumerate(turns) if t.id == h.unit.id)
    lo = hi = at
    while lo > 0 and not hidden(turns[lo - 1]):
        lo -= 1
    while hi + 1 < len(turns) and not hidden(turns[hi + 1]):
        hi += 1
    return tuple(turns[lo : hi + 1])
