"""Syncing one scope: read its Markdown (as little as possible), diff it against the synced state, embed and upsert
what is new or changed (memclaw.index._vector_writer), delete what went, update BM25 and save the new state."""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memclaw.errors import DerivedIndexError, EmbeddingUnavailable, VectorStoreCorrupted
from memclaw.index._bm25 import InvertedBM25
from memclaw.index._links import changes_links, session_links
from memclaw.index.bm25_context import TurnContexts, contexts_key
from memclaw.index.passages import context_rows_all, turn_context, unit_of, unit_vectors
from memclaw.index.scopes import Scope, ScopeCache, index_text
from memclaw.markdown.archive import speaker_is
from memclaw.markdown.units import MemoryUnit
from memclaw.util.text import counted

if TYPE_CHECKING:
    from memclaw.embedding.base import Embedder, Progress
    from memclaw.index.identity import IndexIdentity
    from memclaw.index.unittable import UnitTable
    from memclaw.markdown.formats import ParseNote
    from memclaw.markdown.incremental import FileMark
    from memclaw.store.base import VectorStore

log = logging.getLogger(__name__)


@dataclass
class SyncReport:
    scope: str
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    rebuilt: bool = False
    # units whose vectors wait for the embedding provider (keyword search has them already)
    pending: int = 0
    # vectors embedded and written by this sync (a long unit or a short turn's context: several per unit)
    vectors: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed or self.rebuilt)


class _FewLookups:
    """Membership in a list of ids, for a caller that asks about a few.

    The first lookups scan the list; later ones use a set.
    An append of one fact asks about one or two ids, where hashing 100k ids would cost more than the append.
    """

    __slots__ = ("_ids", "_set", "_scans")

    def __init__(self, ids: list[str]) -> None:
        self._ids = ids
        self._set: set[str] | None = None
        self._scans = 0

    def __contains__(self, uid: object) -> bool:
        if self._set is None:
            self._scans += 1
            if self._scans <= 8:
                return uid in self._ids
            self._set = set(self._ids)
        return uid in self._set


class ScopeRead:
    """What a sync read of a scope's files.

    Its `parts` are the new unit table in parts, kept rows and freshly parsed ones; `parsed` holds the parsed units.
    Its `reread_old` holds the old ids of files parsed in full, the candidates for removal.
    Its `appended` holds the rows appended to each file when nothing else changed: what the state's log records.
    Its `warned` holds, per file, the keys of the parse notes said as warnings (`_note_keys`).
    """

    def __init__(self) -> None:
        self.parts: list[UnitTable] = []
        self.parsed: list[MemoryUnit] = []
        self.parsed_hashes: list[str] = []
        self.reread_old: set[str] = set()
        self.marks: dict[str, FileMark] = {}
        self.appended: list[tuple[str, UnitTable]] = []
        self.full_diff = False
        # else every parsed unit was appended: new ids by construction (incremental)
        self.full_parse = False
        # per file, the keys of its parse notes said so far
        self.warned: dict[str, list[str]] = {}

    def add(self, kept: UnitTable | None, units: list[MemoryUnit], hashes: list[str] | None, source: str = "") -> None:
        from memclaw.index.unittable import UnitTable

        if kept is not None:
            if len(kept):
                self.parts.append(kept)
            return
        self.parts.append(UnitTable.from_units(units, hashes))
        self.appended.append((source, self.parts[-1]))
        self.parsed.extend(units)
        self.parsed_hashes.extend(hashes or [])


def read_scope(cache: ScopeCache, scope: str, old: Scope | None, signatures: dict[str, tuple | None]) -> ScopeRead:
    """The scope's units as the Markdown holds them now, reading as little as possible.

    A file whose signature is unchanged keeps its rows.
    A file that was only appended to has just its tail parsed, exactly (memclaw.markdown.incremental).
    Any other file is parsed in full.
    """
    from memclaw.markdown.files import read_bytes
    from memclaw.markdown.incremental import parse_appended, parse_file
    from memclaw.markdown.memory_md import describe_notes
    from memclaw.util.progress import progress_for

    out = ScopeRead()
    for src, (path, kind) in cache.files(scope).items():
        # a day file that came after the signatures: the next sync reads it
        if src not in signatures:
            continue
        seg = mark = None
        if old is not None:
            seg = old.state.units.segment(src)
            mark = old.state.marks.get(src)
            # rows not in file order (never written so): diff the whole table
            if seg is None:
                out.full_diff = True
        sig = signatures[src]
        if seg is not None and mark is not None and sig is not None and old.state.signatures.get(src) == sig:
            out.add(seg, [], None)
            out.marks[src] = mark
            if src in old.state.warned:
                out.warned[src] = old.state.warned[src]
            continue
        data = read_bytes(path) if sig is not None else None
        if data is None:
            if seg is not None:
                out.reread_old.update(seg.ids)
            continue
        tail = None
        notes: list[ParseNote] = []
        if seg is not None and mark is not None:
            tail = parse_appended(data, mark, kind=kind, scope=scope, source=src, known=_FewLookups(seg.ids),
                                  notes=notes)  # fmt: skip
        if tail is not None:
            units, out.marks[src] = tail
            out.add(seg, [], None)
        else:
            with progress_for(cache.progress, None, 0, f"reading {src} ({len(data) / 1e6:.0f} MB)"):
                units, out.marks[src] = parse_file(data, kind=kind, scope=scope, source=src, notes=notes)
            # a file that had no units: each of its ids is new, as when appended
            if seg is None or len(seg):
                out.full_parse = True
            if seg is not None:
                out.reread_old.update(seg.ids)
        said = set(old.state.warned.get(src, ())) if old is not None else set()
        keys = _note_keys(data, notes)
        # each note is said once: a note already said (the same kind on the same line text) is not said again
        for warning in describe_notes(src, [n for n, k in zip(notes, keys, strict=True) if k not in said]):
            log.warning("%s", warning)
        # a tail parse saw only the new lines: the notes said before still stand
        warned = set(keys) | (said if tail is not None else set())
        if warned:
            out.warned[src] = sorted(warned)
        if units:
            out.add(None, units, [u.content_hash for u in units], src)
    # files that are gone from the folder (an archive day deleted): their units go
    if old is not None:
        for src in old.state.units.sources():
            if src not in signatures:
                seg = old.state.units.segment(src)
                if seg is None:
                    out.full_diff = True
                else:
                    out.reread_old.update(seg.ids)
    return out


class ScopeSync:
    """Brings one scope's index in line with its Markdown. The seams are opened only when vectors are written:
    `store()`, `embedder()`; `wrote()` is told before the first change to the index, `embed_failed(err)` when
    vectors were left pending."""

    def __init__(
        self,
        cache: ScopeCache,
        identity: IndexIdentity,
        *,
        store: Callable[[], VectorStore],
        embedder: Callable[[], Embedder],
        wrote: Callable[[], None],
        embed_failed: Callable[[EmbeddingUnavailable], None],
    ) -> None:
        self.cache = cache
        self.config = cache.config
        head = self.config.memory.agent_reply_vectors == "head"
        # whether a turn is the agent's, when its replies are embedded whole
        self._agent_said = speaker_is(self.config.agent.name) if head else None
        self.identity = identity
        self._store = store
        self._embedder = embedder
        self._wrote = wrote
        self._embed_failed = embed_failed

    def sync_scope(self, scope: str, progress: Progress | None, *, vectors: bool = True) -> SyncReport:
        """Without `vectors`: units, links and BM25 as the Markdown says, every vector to write left pending (the
        next sync with vectors embeds them); a BM25 recall waits for no embedding."""
        import memclaw.index._scope_state as scope_state
        from memclaw.index._vector_writer import Passage, write_vectors
        from memclaw.index.layout import check_layout
        from memclaw.index.unittable import UnitTable
        from memclaw.util.progress import progress_for

        cache, layout = self.cache, self.cache.layout
        report = SyncReport(scope)
        # a sync looks at every file
        signatures = cache.signatures(scope, watched=False)
        old = cache.get(scope)
        check_layout(layout, scope, embedded=cache.embedded)
        dirty = layout.dirty_file(scope)
        in_store_passages: set[str] = set()
        pids_of: dict[str, list[str]] = {}
        caught_up = not old.state.pending or not vectors if old is not None else False
        if old is not None and old.state.signatures == signatures and caught_up and not old.lexical_unsaved:
            report.unchanged = len(old.state.units)
            return report
        read = read_scope(cache, scope, old, signatures)
        table = UnitTable.concat(read.parts) if read.parts else UnitTable.from_units([])
        # the only units that can be new or changed
        units = read.parsed
        hashes = dict(zip((u.id for u in units), read.parsed_hashes, strict=True))
        if old is None:
            desired = {u.id: u for u in units}
            # No trustworthy state: reconcile with whatever the vector store holds (re-embed only what's missing).
            report.rebuilt = True
            try:
                in_store_passages = self._store().ids(scope)
            except VectorStoreCorrupted:
                # the whole store is damaged: sync rebuilds every scope
                raise
            except DerivedIndexError as e:
                report.warnings.append(f"{e}; dropping the scope's vectors")
                self._store().drop(scope)
                in_store_passages = set()
            in_store = {unit_of(pid) for pid in in_store_passages}
            # each unit's passage ids, split once: the checks below and the stale set read them
            pids_of = {u.id: self._passages_of(u) for u in units} if in_store_passages else {}
            # A unit counts as present only if all its passages are (a crash may have left some out).
            old_hashes = {i: hashes[i] for i in in_store if i in desired and set(pids_of[i]) <= in_store_passages}
            stale_in_store = in_store - set(desired)
        else:
            # Appended units continue their file's occurrence numbers: none of their ids is an old one.
            old_hashes = old.state.hashes if read.full_parse or read.full_diff else {}
            # Ids encode their file: only the old rows of a file parsed again in full can have gone.
            stale_in_store = set(old.state.units) - set(table) if read.full_diff else read.reread_old - set(hashes)
        to_embed = [u for u in units if old_hashes.get(u.id) != hashes[u.id]]
        report.added = sum(1 for u in to_embed if u.id not in old_hashes)
        report.updated = len(to_embed) - report.added
        report.removed = len(stale_in_store)
        report.unchanged = len(table) - len(to_embed)
        # catch up: vectors the provider could not give last time
        if old is not None and old.state.pending:
            queued = {u.id for u in to_embed}
            to_embed += [table[i] for i in sorted(old.state.pending) if i in table and i not in queued]

        # Passages: a long unit is embedded as several vectors, a short turn with its context (memclaw.index.passages).
        contexts = _contexts(table, to_embed)
        passages = [
            Passage(pid, text, _metadata(u), u.id, contexts.get(u.id))
            for u in to_embed
            for pid, text in self._vectors_of(u)
        ]
        new_pids = {p.id for p in passages}
        if old is None and in_store_passages:
            # A unit a crash or a Ctrl-C left half-embedded keeps the passages it stored; only the rest are embedded.
            # They are trusted as a whole unit's are: the ids encode the unit and the passage.
            passages = [p for p in passages if p.id not in in_store_passages]
        stale_passages: set[str] = set()
        if old is None:
            # an empty store, e.g. after a wipe, has nothing stale
            if in_store_passages:
                stale_passages = in_store_passages - {pid for pids in pids_of.values() for pid in pids}
        else:
            old_units = old.state.units
            for uid in stale_in_store:
                stale_passages.update(self._passages_of(old_units[uid]))
            # only a unit parsed again in full, or pending, can be an old one
            for u in to_embed:
                if (u.id in old_hashes or u.id in old.state.pending) and u.id in old_units:
                    stale_passages.update(set(self._passages_of(old_units[u.id])) - new_pids)

        # before the first write: a crash from here on makes the next sync reconcile
        def mark_dirty() -> None:
            dirty.parent.mkdir(parents=True, exist_ok=True)
            dirty.touch()
            self._wrote()

        pending: set[str] = set()
        if passages:
            if not vectors:
                pending, err = {p.unit for p in passages}, None
            # not the index's model: its vectors cannot join this index
            elif self.identity.deferred is not None:
                pending, err = {p.unit for p in passages}, self.identity.deferred
            else:
                # loaded before the progress clock starts
                embedder, store = self._embedder(), self._store()
                what = f"embedding {counted(len(to_embed), 'memory')}"
                shown = progress_for(cache.progress, progress, len(passages), what)
                with shown as advance:
                    pending, err = write_vectors(
                        embedder, store, scope, passages, batch_size=self.config.embeddings.batch_size,
                        progress=advance, before_write=mark_dirty, on_dimensions=self.identity.record_dimensions,
                    )  # fmt: skip
            if old is not None and pending and (err is not None or not vectors):
                # an edited unit's old vector must not answer for its new text
                old_units = old.state.units
                for uid in pending:
                    # (a unit pending already has no vector: a keyword-only sync need not open the store for it)
                    if uid in old_units and (vectors or uid not in old.state.pending):
                        stale_passages.update(self._passages_of(old_units[uid]))
            # keyword search gets the units now, the vectors come later
            if err is not None:
                self._embed_failed(err)
                msg = (
                    f"{err}; {counted(len(pending), 'memory')} {'is' if len(pending) == 1 else 'are'} searchable by "
                    "keyword now, the vectors come at the next sync"
                )
                report.warnings.append(msg)
                log.warning(msg)
        report.pending = len(pending)
        report.vectors = sum(1 for p in passages if p.unit not in pending)
        mark_dirty()
        if stale_passages:
            self._store().delete(scope, sorted(stale_passages))

        append_only = old is not None and not (read.full_parse or read.full_diff or stale_in_store)
        # each part: one file
        order = list(dict.fromkeys(p.source_at(0) for p in read.parts)) if append_only else []
        changes = scope_state.Changes(order=order) if old is not None and not old.lexical_unsaved else None
        if old is None:
            lexical = cache.build_lexical(units)
        else:
            removed, added = sorted(stale_in_store), []
            # in-place update; recall holds the same lock while searching
            with cache.lock:
                lexical = old.lexical_to_change()
                # (not a copy of every id: O(changes))
                present = {u.id for u in to_embed if u.id in lexical}
                for i in removed:
                    lexical.remove(i)
                for u in to_embed:
                    if u.id in present:
                        lexical.remove(u.id)
                        removed.append(u.id)
                    tokens = cache.tokenizer.tokenize(index_text(u))
                    lexical.add(u.id, tokens)
                    added.append((u.id, tokens))
            if changes is not None:
                changes.bm25_removed, changes.bm25_added = removed, added
        # only units that link to nothing appended (archive turns, undated facts): the links are unchanged
        links = old.state.links if append_only and not changes_links(units) else session_links(table)
        if append_only and changes is not None:
            changes.appended = read.appended
            old_links = old.state.links
            changes.links = {k: v for k, v in links.items() if old_links.get(k) != v}
            changes.links.update({k: None for k in old_links if k not in links})
        state = scope_state.ScopeState(scope, signatures, table, links, read.marks, pending, read.warned)
        sf = layout.state_file(scope)

        def lexical_bytes() -> bytes:
            # compacts the live index
            with cache.lock:
                return lexical.to_bytes()

        agent, built = self.config.agent.name, []

        def contexts_bytes(digest: str) -> bytes | None:
            # built here, after the save compacted the index, and saved with it: neither the next recall nor a
            # cold start builds them (memclaw.index.bm25_context; 0.4 s at 100k turns)
            if not (isinstance(lexical, InvertedBM25) and self.config.recall.tuning.bm25_context_weight > 0
                    and table.rows_of("archive")):  # fmt: skip
                return None
            with cache.lock:
                built.append(TurnContexts(table, lexical, agent))
            return built[0].to_bytes(contexts_key(agent, digest), lexical)

        # seconds of JSON: say so
        big = changes is None and len(table) > 50_000
        with progress_for(cache.progress, None, 0, "saving the index") if big else contextlib.nullcontext():
            scope_state.save(sf, state, lexical_bytes, changes, contexts_bytes)
        dirty.unlink(missing_ok=True)
        synced = Scope(state, lexical, scope_state.file_sig(sf))
        if built:
            synced.set_contexts(agent, built[0])
        cache.put(scope, synced)
        if report.changed:
            log.info("synced %s: +%d ~%d -%d", scope, report.added, report.updated, report.removed)
        return report

    def _vectors_of(self, u: MemoryUnit) -> list[tuple[str, str]]:
        """(vector id, text) of each vector `u` is embedded as (memclaw.index.passages.unit_vectors).

        With memory.agent_reply_vectors = "head", a turn of the agent's is one vector of its whole text.
        """
        if self._agent_said is not None and u.kind == "archive" and self._agent_said(str(u.extra.get("speaker", ""))):
            return unit_vectors(u.id, index_text(u), whole=True)
        return unit_vectors(u.id, index_text(u))

    def _passages_of(self, u: MemoryUnit) -> list[str]:
        return [pid for pid, _t in self._vectors_of(u)]


def _note_keys(data: bytes, notes: list[ParseNote]) -> list[str]:
    """A key per parse note that stays the same while its line does: its kind, detail and the line's text (not its
    number: a fact added above it moves it), numbered when the same note occurs more than once."""
    if not notes:
        return []
    lines = data.split(b"\n")
    seen: dict[str, int] = {}
    out: list[str] = []
    for n in notes:
        text = lines[n.line - 1] if 0 < n.line <= len(lines) else b""
        digest = hashlib.sha256(b"\0".join((n.kind.encode(), n.detail.encode(errors="replace"), text))).hexdigest()
        seen[digest] = seen.get(digest, 0) + 1
        out.append(f"{digest[:16]}:{seen[digest]}")
    return out


def _contexts(table: UnitTable, units: list[MemoryUnit]) -> dict[str, str]:
    """Unit id -> context of each short archived turn among `units` that has one.

    The context is the turns beside it in its chunk, as the table holds them (memclaw.index.passages.turn_context).
    Only these rows are read, so an append reads its own turns, not the scope.
    """
    turns = [(u, row) for u in units if u.kind == "archive" and (row := table.row_of(u.id)) is not None]
    if not turns:
        return {}
    before, after = context_rows_all(table, [row for _u, row in turns])
    texts, out = table.texts, {}
    for (u, _row), b, a in zip(turns, before.tolist(), after.tolist(), strict=True):
        if b >= 0 or a >= 0:
            context = turn_context(texts[b] if b >= 0 else None, u.text, texts[a] if a >= 0 else None)
            if context is not None:
                out[u.id] = context
    return out


def _metadata(u: MemoryUnit) -> dict[str, Any]:
    md: dict[str, Any] = {"kind": u.kind, "source": u.source, "line": u.line}
    if u.timestamp:
        md["ts"] = u.timestamp.isoformat()
    return md
