"""What the owner forgot does not come back through the archive: at recall time, an archived turn that restates a
forgotten memory (memclaw.service.forgotten.restates: most of its content words, or most of its distinctive names
and numbers, distinctive by how few memories of the scope hold them now) and was said before it was forgotten is left
out, as a hit and from every excerpt's window (the window stops short of it). A turn said
after the forget is news, and kept, as consolidation keeps it.

Facts and history entries follow the same rule (`restates`), for the units that restated a forgotten memory when it
was forgotten (its `mentions`, noted by `mentions` at forget time). Such a fact is left out. Such a history entry is
served with each sentence that restates it masked (memclaw.service.forgotten.MASKED). It is left out when nothing
else is left, or when what is left shares no word with the query (it matched through what was masked). The Markdown
is not rewritten: the files stay the owner's, and `memclaw memory forget` names these units. A unit written after
the forget is news, as a turn is. A memory forgotten before mentions were noted masks the history entries dated
before its forget.

The forgotten file (`sessions/forgotten.jsonl`) is read again only when it changed (its size and mtime).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from memclaw.markdown.units import MemoryUnit
from memclaw.recall.results import RecallHit, RecallResult
from memclaw.service.forgotten import (
    FORGOTTEN_FILE,
    MASKED,
    DocFreq,
    ForgottenKey,
    ForgottenMemory,
    key_of,
    load,
    masked,
    restates,
    sentences,
)

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

    def keys_in(self, scope: str) -> Keys:
        """The keys of the memories forgotten in `scope`, their names distinctive in it now."""
        entries = [(f, key) for f, key in self._load() if f.scope == scope]
        if not entries:
            return []
        doc_freq = self.doc_freq(scope)
        return [(f, key.distinctive(doc_freq)) for f, key in entries]

    def _restates(self, text: str, key: ForgottenKey) -> bool:
        return restates(set(self.tokenize(text)), key)

    def said_in(self, u: MemoryUnit) -> list[set[str]]:
        """The words of fact or history entry `u` as `restated_in` reads them: a fact whole, an entry per sentence."""
        return [set(self.tokenize(p)) for p in (sentences(u.text) if u.kind == "history" else [u.text])]

    def restated_in(self, said: list[set[str]], key: ForgottenKey) -> bool:
        """Whether a fact or history entry (its `said_in`) restates a forgotten memory: a fact as a whole, a history
        entry in one of its sentences at least (as consolidation's scrub reads a new one). A long entry that holds
        the words of a short fact spread over many sentences does not restate it."""
        return any(restates(words, key) for words in said)

    def _mentioned(self, u: MemoryUnit, keys: Keys) -> list[ForgottenKey]:
        """The keys of the forgotten memories that fact or history entry `u` restated when they were forgotten (one
        noted before mentions were: a history entry dated before the forget that restates it)."""
        if u.kind == "archive":
            return []
        said = u.timestamp.astimezone() if u.kind == "history" and u.timestamp is not None else None
        words: list[set[str]] | None = None
        out = []
        for f, key in keys:
            if f.mentions is not None:
                hit = u.id in f.mentions
            elif said is not None and said <= f.at:
                words = self.said_in(u) if words is None else words
                hit = self.restated_in(words, key)
            else:
                hit = False
            if hit:
                out.append(key)
        return out

    def shown(self, u: MemoryUnit, keys: Keys) -> MemoryUnit | None:
        """A fact or history entry as recall serves it (the module docstring): itself, masked, or None (left out)."""
        mentioned = self._mentioned(u, keys)
        if not mentioned:
            return u
        if u.kind != "history":
            return None
        text = masked(u.text, lambda s: any(self._restates(s, k) for k in mentioned))
        # no one sentence restates it now (its names' frequencies changed since): the whole entry is out
        if text is None or text == u.text:
            return None
        return dataclasses.replace(u, text=text)

    def _still_matches(self, shown: MemoryUnit, query: set[str]) -> bool:
        """Whether a masked entry's visible text still shares a word with the query (a query of stop words only:
        yes). An entry that matched only through what was masked is left out, not served as a masked first hit."""
        return not query or bool(query & set(self.tokenize(shown.text.replace(MASKED, " "))))

    def mentions(self, scope: str, gone: Sequence[MemoryUnit], units: Sequence[MemoryUnit]) -> dict[str, list[str]]:
        """For each fact or history entry about to be forgotten: the ids of the other facts and history entries
        of `units` that restate it (its names distinctive in the scope as it is indexed now)."""
        doc_freq = self.doc_freq(scope)
        ids = {u.id for u in gone}
        rest = [(u, self.said_in(u)) for u in units if u.kind != "archive" and u.id not in ids]
        out: dict[str, list[str]] = {}
        for g in gone:
            if g.kind == "archive":
                continue
            key = key_of(g.text, self.tokenize).distinctive(doc_freq)
            out[g.id] = [u.id for u, said in rest if self.restated_in(said, key)]
        return out

    def marks(self, scope: str, units: Sequence[MemoryUnit]) -> dict[str, str]:
        """Which facts and history entries recall leaves out ("hidden") or serves in part ("masked"), by id."""
        keys = self.keys_in(scope)
        out: dict[str, str] = {}
        for u in units if keys else ():
            shown = self.shown(u, keys)
            if shown is not u:
                out[u.id] = "hidden" if shown is None else "masked"
        return out

    def apply(self, result: RecallResult) -> RecallResult:
        """`result` without what the owner's forgets hide: archived turns (hits and window turns), facts, and the
        sentences of history entries."""
        keys = self.keys_in(result.scope)
        if not keys:
            return result
        query = set(self.tokenize(result.query))
        kept: list[RecallHit] = []
        for h in result.hits:
            if self.hides(h.unit, keys):
                continue
            if h.excerpt:
                h = dataclasses.replace(h, excerpt=_window_without(h, lambda t: self.hides(t, keys)))
            shown = self.shown(h.unit, keys)
            if shown is None or (shown is not h.unit and not self._still_matches(shown, query)):
                continue
            kept.append(h if shown is h.unit else dataclasses.replace(h, unit=shown))
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
