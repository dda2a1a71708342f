"""The scope cache: each scope's memory files, and its synced state (unit table, BM25 index) loaded once and
reloaded when another process has synced since."""

from __future__ import annotations

import bisect
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from memclaw.errors import DerivedIndexError
from memclaw.index import layout as ix
from memclaw.markdown.formats import NAMED_DAY_KINDS, event_days, without_cid
from memclaw.markdown.units import OWNER_SCOPE, MemoryUnit
from memclaw.util.text import counted

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.index._bm25 import InvertedBM25, LexicalIndex
    from memclaw.index._scope_state import ScopeState
    from memclaw.index.bm25_context import TurnContexts
    from memclaw.index.tokenizer import Tokenizer
    from memclaw.util.dirwatch import DirWatch
    from memclaw.util.progress import ProgressFactory
    from memclaw.workspace import Workspace

log = logging.getLogger(__name__)


class Span(Protocol):
    """A stretch of time (as memclaw.recall.dates.DateRange): from `start` up to `end`, excluded."""

    @property
    def start(self) -> datetime: ...
    @property
    def end(self) -> datetime: ...
    @property
    def stamps(self) -> bool:
        """False: only a day a unit's text names falls in it, not the unit's stamp (memclaw.markdown.dates)."""
        ...


def index_text(u: MemoryUnit) -> str:
    """The text of a unit that BM25 and the embedding model read: its text, a fact's learned-mark without the
    consolidation id (a link, not words: memclaw.markdown.formats.without_cid)."""
    return without_cid(u.text) if u.kind == "fact" else u.text


class Scope:
    """Runtime state of one scope: the unit table, the BM25 index and the state file it came from."""

    def __init__(
        self,
        state: ScopeState,
        lexical: LexicalIndex,
        state_sig: tuple | None,
        *,
        saved_contexts: tuple[str, bytes] | None = None,
    ) -> None:
        self.state = state
        self.lexical = lexical
        self.state_sig = state_sig
        # rebuilt from the unit table on load (the saved one was damaged)
        self.lexical_unsaved = False
        self._dated: tuple[list[datetime], list[str], list[tuple[datetime, datetime, str]]] | None = None
        self._entries_by_cid: dict[str, list[str]] | None = None
        # the agent's name, its turns left out
        self._contexts: tuple[str, TurnContexts] | None = None
        # (digest, bytes) of the turn contexts saved with the state (memclaw.index._scope_state), until first used
        self.saved_contexts = saved_contexts

    def turn_contexts(self, agent: str) -> TurnContexts | None:
        """The context documents of the scope's short archived turns for BM25, the turns of the agent named `agent`
        left out (memclaw.index.bm25_context; built on first use, again when the index's slots changed); None for
        an index that can't score them."""
        from memclaw.index._bm25 import InvertedBM25
        from memclaw.index.bm25_context import TurnContexts

        lex = self.lexical
        if not isinstance(lex, InvertedBM25):
            return None
        if self._contexts is None or self._contexts[0] != agent or not self._contexts[1].fits(lex):
            saved = self._saved_contexts(agent, lex)
            self._contexts = (agent, saved or TurnContexts(self.state.units, lex, agent))
        return self._contexts[1]

    def lexical_to_change(self) -> LexicalIndex:
        """The BM25 index, to be changed in place (under the cache's lock): the turn contexts saved with the old
        state no longer describe it."""
        self.saved_contexts = None
        return self.lexical

    def set_contexts(self, agent: str, contexts: TurnContexts) -> None:
        """The turn contexts a sync built for this state (the ones it saved)."""
        self._contexts, self.saved_contexts = (agent, contexts), None

    def _saved_contexts(self, agent: str, lex: InvertedBM25) -> TurnContexts | None:
        """The turn contexts saved with the state, if they were built for it and for `agent` (read once)."""
        from memclaw.index.bm25_context import TurnContexts, contexts_key

        saved, self.saved_contexts = self.saved_contexts, None
        if saved is None:
            return None
        try:
            return TurnContexts.from_bytes(saved[1], contexts_key(agent, saved[0]), lex)
        except ValueError as e:
            # derived data: built anew, as when there were none
            log.info("the saved BM25 turn contexts are unusable (%s); building them", e)
            return None

    def entries_by_cid(self) -> dict[str, list[str]]:
        """Consolidation id -> the history entries that carry it (memclaw.index._links; built on first use)."""
        if self._entries_by_cid is None:
            from memclaw.index._links import entries_by_cid

            self._entries_by_cid = entries_by_cid(self.state.units)
        return self._entries_by_cid

    def dated_in(self, ranges: Sequence[Span], limit: int) -> list[str]:
        """Up to `limit` ids of units dated inside any of the ranges (memclaw.recall.ranking.stamp_in).

        First the units stamped inside one, newest first; then the facts and summaries whose text names such a day.
        The sorted date index and the list of named days are built on first use.
        """
        if self._dated is None:
            self._dated = self._date_index()
        stamps, ids, named = self._dated
        out: list[str] = []
        for r in ranges:
            if not r.stamps:
                continue
            lo, hi = bisect.bisect_left(stamps, r.start), bisect.bisect_left(stamps, r.end)
            out += reversed(ids[max(lo, hi - limit) : hi])
        out += [i for start, end, i in named if any(max(start, r.start) < min(end, r.end) for r in ranges)]
        return list(dict.fromkeys(out))[:limit]

    def _date_index(self) -> tuple[list[datetime], list[str], list[tuple[datetime, datetime, str]]]:
        table = self.state.units
        ids, texts = table.ids, table.texts
        dated = [(row, datetime.fromisoformat(ts).replace(tzinfo=None)) for row, _, ts in table.dated_rows()]
        pairs = sorted((ts, ids[row]) for row, ts in dated)
        stamp_of = dict(dated)
        named = [
            (start, end, ids[row])
            for kind in NAMED_DAY_KINDS
            for row in table.rows_of(kind)  # type: ignore[arg-type]
            for start, end in event_days(texts[row], kind, stamp_of.get(row))
        ]
        named.sort(key=lambda x: x[0], reverse=True)
        return [t for t, _ in pairs], [i for _, i in pairs], named


class ScopeCache:
    """The scopes of one workspace's index as this process last read them. `lock` guards the cache and in-place
    updates of a scope's BM25 index (recall holds it while searching).

    At most `memory.open_scopes` scopes stay loaded (the owner's always among them): the least recently used other
    scope is let go, with its archive folder's watch, and read again from its state file at its next use. A Scope
    holds no open file, so a turn still using one that was let go keeps a consistent copy."""

    def __init__(self, workspace: Workspace, layout: ix.IndexLayout, tokenizer: Tokenizer, config: Config) -> None:
        self.workspace = workspace
        self.layout = layout
        self.tokenizer = tokenizer
        self.config = config
        # shows long work (the CLI: memclaw.util.progress)
        self.progress: ProgressFactory | None = None
        self.lock = threading.RLock()
        self._scopes: OrderedDict[str, Scope] = OrderedDict()
        # the archive folders' (memclaw.util.dirwatch)
        self._watches: dict[str, tuple[DirWatch, dict[str, tuple]]] = {}

    @property
    def embedded(self) -> bool:
        """The vector store is embedded (its folder sits in the index), not a Chroma server."""
        return not self.config.memory.chroma_url

    # ----- the memory files of a scope -------------------------------------------------------------------
    def files(self, scope: str) -> dict[str, tuple[Path, str]]:
        """The scope's memory files by source, with the kind of unit each holds: MEMORY.md and HISTORY.md (whether
        or not they exist), then the archive's day files, oldest first."""
        ws = self.workspace
        out = {}
        for path, kind in ((ws.memory_file(scope), "fact"), (ws.history_file(scope), "history")):
            out[ws.source_of(path)] = (path, kind)
        for src, path, _st in self._archive(scope):
            out[src] = (path, "archive")
        return out

    def _archive(self, scope: str) -> list[tuple[str, Path, os.stat_result]]:
        """(source, path, lstat) of the scope's archive day files (one scan of the folder)."""
        ws = self.workspace
        d, found = ws.archive_stats(scope)
        if not found:
            return []
        prefix = ws.source_of(d) + "/"
        return [(prefix + name, d / name, st) for name, st in found]

    def signatures(self, scope: str, *, watched: bool = True) -> dict[str, tuple | None]:
        """Each memory file's signature (memclaw.markdown.files.file_signature), None for a missing one. The
        archive's day files are looked at again only when their folder's watch says something changed there
        (memclaw.util.dirwatch; every time where it cannot be watched, and with `watched=False`)."""
        # MemoryFileError, not a traceback, for an unreadable file
        from memclaw.markdown.files import file_signature

        ws = self.workspace
        out = {ws.source_of(p): file_signature(p) for p in (ws.memory_file(scope), ws.history_file(scope))}
        out.update(self._archive_signatures(scope) if watched else _day_signatures(ws, scope))
        return out

    def _archive_signatures(self, scope: str) -> dict[str, tuple]:
        from memclaw.util.dirwatch import DirWatch

        with self.lock:
            known = self._watches.get(scope)
            if known is not None and not known[0].changed():
                return known[1]
            watch = known[0] if known is not None else DirWatch(self.workspace.archive_dir(scope))
            # before the scan: a change made during it is seen next time
            watch.begin()
            sigs = _day_signatures(self.workspace, scope)
            self._watches[scope] = (watch, sigs)
            self._evict_watches()
            return sigs

    def _evict_watches(self) -> None:
        """Watches are kept for loaded scopes (and at most `memory.open_scopes` others, oldest first out)."""
        limit = self.config.memory.open_scopes
        extra = [s for s in self._watches if s not in self._scopes and s != OWNER_SCOPE]
        for scope in extra[: max(0, len(self._watches) - 2 * limit)]:
            self._watches.pop(scope)[0].close()

    def parse(self, scope: str, kinds: Iterable[str] | None = None) -> list[MemoryUnit]:
        """Every unit of the scope as its Markdown holds it now (facts, then history, then the archive's turns), or
        only those of `kinds`."""
        from memclaw.markdown.files import read_units

        wanted = set(kinds) if kinds is not None else None
        units: list[MemoryUnit] = []
        for src, (path, kind) in self.files(scope).items():
            if (wanted is None or kind in wanted) and path.exists():
                units.extend(read_units(path, scope=scope, kind=kind, source=src))
        return units

    def never_written(self, scope: str) -> bool:
        """The scope has no memory file and no index state (a few stats: no folder or index file is made)."""
        try:
            if self.layout.state_file(scope).exists():
                return False
        except OSError:
            # the index cannot be looked into: the usual path reports it
            return False
        return not any(sig is not None for sig in self.signatures(scope).values())

    def is_synced(self, scope: str) -> bool:
        """The scope's synced state matches its Markdown, with every vector and its BM25 index saved."""
        sc = self.get(scope)
        return (
            sc is not None
            and sc.state.signatures == self.signatures(scope)
            and not sc.state.pending
            and not sc.lexical_unsaved
        )

    def pending(self, scope: str) -> set[str]:
        """Ids of the scope's units whose vectors wait for the embedding provider."""
        sc = self.get(scope)
        return set(sc.state.pending) if sc is not None else set()

    def known_scopes_on_disk(self) -> list[str]:
        """The workspace's scopes and those the index holds a state for."""
        from memclaw.index._scope_state import read_scope_name

        out = set(self.workspace.scopes())
        root = self.layout.root / "scopes"
        if root.is_dir():
            for d in root.iterdir():
                name = read_scope_name(d / ix.STATE_FILE)
                if name:
                    out.add(name)
        return sorted(out)

    def has_states(self) -> bool:
        """Some scope has a state file (of this memclaw or an older one)."""
        root = self.layout.root / "scopes"
        names = (ix.STATE_FILE, *ix.LEGACY_STATE_FILES)
        return root.is_dir() and any(d.joinpath(n).exists() for d in root.iterdir() for n in names)

    # ----- the cache -------------------------------------------------------------------------------------
    def get(self, scope: str) -> Scope | None:
        """The scope's synced state, reloaded if another process synced since; None if it has none (or a damaged
        one: the next sync rebuilds it)."""
        from memclaw.index._scope_state import file_sig

        with self.lock:
            sc = self._scopes.get(scope)
            if sc is not None:
                self._scopes.move_to_end(scope)
        if sc is not None and sc.state_sig == file_sig(self.layout.state_file(scope)):
            return sc
        ix.check_layout(self.layout, scope, embedded=self.embedded)
        # absent, or another process synced since
        sc = self._load(scope)
        if sc is not None:
            self.put(scope, sc)
        else:
            with self.lock:
                self._scopes.pop(scope, None)
        return sc

    def doc_freq(self, scope: str) -> Callable[[str], int]:
        """How many memories of `scope` hold a BM25 token, as its synced index holds them now (0 without one)."""
        sc = self.get(scope)

        def count(term: str) -> int:
            if sc is None:
                return 0
            with self.lock:
                return sc.lexical.doc_freq(term)

        return count

    def put(self, scope: str, sc: Scope) -> None:
        with self.lock:
            self._scopes[scope] = sc
            self._scopes.move_to_end(scope)
            self._evict()

    def loaded(self) -> list[str]:
        """The scopes loaded now, least recently used first."""
        with self.lock:
            return list(self._scopes)

    def _evict(self) -> None:
        """Let go of the least recently used scopes beyond `memory.open_scopes` (never the owner's)."""
        limit = self.config.memory.open_scopes
        while len(self._scopes) > limit:
            victim = next((s for s in self._scopes if s != OWNER_SCOPE), None)
            if victim is None:
                return
            del self._scopes[victim]
            watch = self._watches.pop(victim, None)
            if watch is not None:
                watch[0].close()

    def clear(self) -> None:
        with self.lock:
            self._scopes.clear()

    def _load(self, scope: str) -> Scope | None:
        """Load a scope's saved state and BM25 index; None if absent or corrupted (caller rebuilds)."""
        import memclaw.index._scope_state as scope_state

        sf = self.layout.state_file(scope)
        sig = scope_state.file_sig(sf)
        try:
            loaded = scope_state.load(sf)
        except DerivedIndexError as e:
            if not sf.is_file():
                # not memclaw's file to replace (a directory...): said in one line, with the fix
                raise
            log.warning("%s; rebuilding this scope from the Markdown", e)
            return None
        if loaded is None or self.layout.dirty_file(scope).exists():
            return None
        state, lexical = loaded.state, loaded.lexical
        if lexical is not None and len(lexical) != len(state.units):
            loaded.lexical_error = "it does not match the unit table"
            lexical = None
        if lexical is None:
            log.warning("BM25 index of scope %s is unusable (%s); rebuilding it from the unit table", scope,
                        loaded.lexical_error)  # fmt: skip
            sc = Scope(state, self.build_lexical(state.units.values()), sig)
            # the next sync saves it (it holds the writer lock)
            sc.lexical_unsaved = True
            return sc
        return Scope(state, lexical, sig, saved_contexts=loaded.contexts)

    def build_lexical(self, units: Iterable[MemoryUnit]) -> LexicalIndex:
        """A BM25 index of these units (progress shown for a big one)."""
        from memclaw.index._bm25 import InvertedBM25
        from memclaw.util.progress import progress_for

        units = list(units)
        lex = InvertedBM25()
        last = 0
        what = f"indexing the words of {counted(len(units), 'memory')}"
        with progress_for(self.progress, None, len(units), what) as done:
            for i, u in enumerate(units, 1):
                lex.add(u.id, self.tokenizer.tokenize(index_text(u)))
                if done is not None and (i % 1000 == 0 or i == len(units)):
                    done(i - last)
                    last = i
        return lex


def _day_signatures(ws: Workspace, scope: str) -> dict[str, tuple]:
    """The signatures of the scope's archive day files, from one scan of their folder."""
    d, found = ws.archive_stats(scope, ordered=False)
    prefix = ws.source_of(d) + "/" if found else ""
    # as file_signature's
    return {prefix + name: (st.st_mtime_ns, st.st_size, st.st_ino) for name, st in found}
