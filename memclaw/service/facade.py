"""MemoryService: one workspace's Markdown memory, its derived index, and hybrid recall over it.

The Markdown is the source of truth. Writes go to the Markdown first (atomically), then the index syncs.
Recall auto-syncs a scope when its files changed (edits by hand or by the agent's file tools included).
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memclaw.config import Config
from memclaw.errors import (
    EmbeddingUnavailable,
    IndexError_,
    NothingToRecall,
    UsageError,
    VectorStoreCorrupted,
    VectorStoreUnavailable,
)
from memclaw.index import layout as ix
from memclaw.index.passages import is_head, is_long, unit_of, unit_vectors
from memclaw.markdown.units import OWNER_SCOPE, MemoryUnit
from memclaw.permission_errors import from_permission_error
from memclaw.recall.dates import DateRange, find_date_ranges
from memclaw.recall.fusion import FusionParams, apply_floors, date_boost, fuse, link_boost, recency_boost
from memclaw.recall.results import RecallHit, RecallResult, Signal
from memclaw.util.redact import redact_url

if TYPE_CHECKING:
    from collections.abc import Iterator

    from memclaw.embedding.base import Embedder
    from memclaw.index.bm25_scoring import LexicalIndex
    from memclaw.index.tokenizer import Tokenizer
    from memclaw.index.unittable import UnitTable
    from memclaw.markdown.fact_ops import FactOp
    from memclaw.markdown.incremental import FileMark
    from memclaw.store.base import VectorStore
    from memclaw.util.progress import ProgressFactory
    from memclaw.workspace import Workspace

log = logging.getLogger(__name__)

RECENCY_WEIGHT = 0.3
DATE_ONLY_MAX_DAYS = 31
"""A query naming a range up to this long ("last week", "on 8 May") also recalls units stamped inside it that
match no word of the query; a wider range ("in 2023") only lifts units that match on their own."""
INTERRUPTED_SYNC = (
    "interrupted: the index is incomplete (the Markdown is intact, and what was embedded is kept); "
    "the next memclaw command finishes it"
)


class _Scope:
    """Runtime state of one scope: the unit table, the BM25 index and the state file it came from."""

    def __init__(self, state: ix.ScopeState, lexical: LexicalIndex, state_sig: tuple | None) -> None:
        self.state = state
        self.lexical = lexical
        self.state_sig = state_sig
        self.lexical_unsaved = False  # rebuilt from the unit table on load (the saved one was damaged)
        self._dated: tuple[list[datetime], list[str]] | None = None

    def dated_in(self, ranges: Sequence[DateRange], limit: int) -> list[str]:
        """Up to `limit` ids of units stamped inside any of the ranges, newest first (a sorted date index,
        built on first use)."""
        if self._dated is None:
            table = self.state.units
            ids = table.ids
            rows = table.dated_rows()
            pairs = sorted((datetime.fromisoformat(ts).replace(tzinfo=None), ids[row]) for row, _, ts in rows)
            self._dated = ([t for t, _ in pairs], [i for _, i in pairs])
        stamps, ids = self._dated
        out: list[str] = []
        for r in ranges:
            lo, hi = bisect.bisect_left(stamps, r.start), bisect.bisect_left(stamps, r.end)
            out += reversed(ids[max(lo, hi - limit) : hi])
        return list(dict.fromkeys(out))[:limit]


class _ScopeRead:
    """What a sync read of a scope's files: the new unit table in parts (kept rows and freshly parsed ones),
    the parsed units, the old ids of files parsed in full (candidates for removal), the files' marks, and the rows
    appended to each file when nothing else changed (what the state's log records, memclaw.index.scope_state)."""

    def __init__(self) -> None:
        self.parts: list[UnitTable] = []
        self.parsed: list[MemoryUnit] = []
        self.parsed_hashes: list[str] = []
        self.reread_old: set[str] = set()
        self.marks: dict[str, FileMark] = {}
        self.appended: list[tuple[str, UnitTable]] = []
        self.full_diff = False
        self.full_parse = False  # else every parsed unit was appended: new ids by construction (incremental)

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


class MemoryService:
    """Facade over one workspace's memory. Recall may run concurrently with a sync: it reads the previous
    state until the sync swaps in the new one."""

    def __init__(
        self,
        workspace: Workspace,
        config: Config,
        *,
        embedder: Embedder | None = None,
        store: VectorStore | None = None,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        self.workspace = workspace
        self.config = config
        self._embedder = embedder
        self._store = store
        if tokenizer is None:
            from memclaw.index.tokenizer import Tokenizer

            tokenizer = Tokenizer()
        self.tokenizer = tokenizer
        self.layout = ix.IndexLayout(Path(config.memory.index_dir or workspace.index_dir))
        self._scopes: dict[str, _Scope] = {}
        self._lock = threading.RLock()  # guards _scopes and in-place lexical updates
        self._write_lock = threading.Lock()  # one sync at a time in this process
        self._manifest_checked = False
        self._manifest_ok = False  # the manifest was found to serve these settings (no rebuild needed)
        # The new embedding model cannot embed yet (no key, provider down): the index keeps the old model's identity
        # and vectors, new vectors wait (pending), recall uses BM25 alone. Cleared once it can.
        self._deferred: EmbeddingUnavailable | None = None
        self.embed_error: EmbeddingUnavailable | None = None  # why the last sync left vectors pending, if it did
        self._namespace: str | None = None
        self._store_lock = threading.Lock()  # one opening of the vector store
        self._prefetch: threading.Thread | None = None
        self._prefetch_error: BaseException | None = None
        self.progress: ProgressFactory | None = None  # shows long embedding work (the CLI: memclaw.util.progress)
        self.on_interrupt: Callable[[str], None] | None = None  # told what an interrupted sync left (the CLI says it)
        self._sync_wrote = False  # the running sync has changed the index (an interrupt leaves it incomplete)
        self._probed: set[tuple[int, str]] = set()  # (store, scope) read once for damage (_probe_store)

    # ----- seams -----------------------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from memclaw.embedding.load import load_embedder

            self._embedder = load_embedder(self.config.embeddings)
        return self._embedder

    @property
    def store(self) -> VectorStore:
        err = self._join_prefetch()
        if err is not None:  # what opening the store would have raised here, said once
            raise err
        with self._store_lock:
            return self._open_store()

    def _join_prefetch(self) -> BaseException | None:
        """Wait for a running prefetch (not from inside it); its error, if any, handed over once."""
        t = self._prefetch
        if t is None or t is threading.current_thread():
            return None
        t.join()
        self._prefetch = None
        err, self._prefetch_error = self._prefetch_error, None
        return err

    def prefetch_store(self, scope: str) -> None:
        """Open the vector store and load `scope`'s collection in a background thread, while the caller loads
        the unit table, BM25 and the embedder: a cold `memclaw recall` pays the chromadb import (~0.7 s) and
        Chroma's first read of a 100k collection (~0.5 s) alongside them instead of after. Errors surface at the
        next use of `store`, as if it had been opened there."""
        with self._store_lock:
            if self._store is not None or self._prefetch is not None:
                return
            self._prefetch = threading.Thread(
                target=self._prefetch_run, args=(scope,), name="memclaw-store-prefetch", daemon=True
            )
            self._prefetch.start()

    def _prefetch_run(self, scope: str) -> None:
        try:
            self.store.warm(scope)
        except BaseException as e:  # re-raised in the caller's thread by `store`
            self._prefetch_error = e

    def _open_store(self) -> VectorStore:
        if self._store is None:
            from memclaw.store.clients import open_chroma_store

            m = self.config.memory
            headers = {k: v.get_secret_value() for k, v in m.chroma_headers.items()}
            lost = not m.chroma_url and not (self.layout.chroma_dir / "chroma.sqlite3").exists() and self._has_states()
            self._store = open_chroma_store(
                path=None if m.chroma_url else self.layout.chroma_dir,
                url=m.chroma_url,
                headers=headers,
                namespace=self.namespace,
                timeout_s=m.chroma_timeout_s,
            )
            if lost:  # said once: sync and recall catch it and rebuild; the store itself is usable (empty)
                raise VectorStoreCorrupted(
                    f"the Chroma store at {self.layout.chroma_dir} is missing though the index lists memories; "
                    "run `memclaw memory reindex` to rebuild it from the Markdown"
                )
        return self._store

    def _has_states(self) -> bool:
        root = self.layout.root / "scopes"
        names = (ix.STATE_FILE, *ix.LEGACY_STATE_FILES)
        return root.is_dir() and any(d.joinpath(n).exists() for d in root.iterdir() for n in names)

    @property
    def namespace(self) -> str:
        """The workspace's key in the vector store. Recorded in the index manifest, so a moved workspace keeps its
        vectors; a new index takes it from the workspace's path."""
        if self._namespace is None:
            ns = (ix.read_manifest(self.layout) or {}).get("namespace")
            self._namespace = ns if isinstance(ns, str) and ns else self._path_namespace()
        return self._namespace

    def _path_namespace(self) -> str:
        return hashlib.sha256(str(self.workspace.root.resolve()).encode()).hexdigest()[:16]

    def _fingerprints(self) -> dict[str, Any]:
        return {
            "format": ix.FORMAT_VERSION,
            "embedder": self._embedder_fingerprint(),
            "tokenizer": self.tokenizer.fingerprint,
            "store": ix.store_id(self.config.memory.chroma_url),
        }

    def _embedder_fingerprint(self) -> str:
        """The configured embedder's fingerprint, without loading the model when the config names it."""
        if self._embedder is None:
            from memclaw.embedding.load import fingerprint_for

            fp = fingerprint_for(self.config.embeddings)
            if fp is not None:
                return fp
        return self.embedder.fingerprint

    def _mismatch(self, have: dict | None, want: dict[str, Any]) -> tuple[str | None, bool]:
        """(why the index in `have` cannot serve `want`, or None; whether this workspace is a copy of one that
        still uses the same Chroma server, which needs its own namespace there)."""
        reason = ix.rebuild_reason(have, want)
        was = (have or {}).get("workspace")
        if have is not None and was is None and have.get("namespace") not in (None, self._path_namespace()):
            was = ""  # an older manifest built elsewhere: moved or copied, it cannot tell; keep the copy apart
        copied = (
            bool(self.config.memory.chroma_url)
            and isinstance(was, str)
            and was != str(self.workspace.root.resolve())
            and (not was or Path(was).is_dir())
        )
        if copied:
            why = "the workspace was copied (the copy gets its own vectors on the Chroma server)"
            reason = f"{reason}; {why}" if reason else why
        return reason, copied

    def index_mismatch(self) -> str | None:
        """Why the index must be rebuilt before it can serve the current settings ("the store changed", "the
        embedding model changed"...), or None."""
        if self._manifest_checked or self._manifest_ok:
            return None
        reason, _ = self._mismatch(ix.read_manifest(self.layout), self._fingerprints())
        self._manifest_ok = reason is None
        return reason

    # ----- files -----------------------------------------------------------------------------------------
    def _files(self, scope: str) -> dict[str, tuple[Path, str]]:
        ws = self.workspace
        out = {}
        for path, kind in ((ws.memory_file(scope), "fact"), (ws.history_file(scope), "history")):
            out[ws.source_of(path)] = (path, kind)
        return out

    def _signatures(self, scope: str) -> dict[str, tuple | None]:
        from memclaw.markdown.files import file_signature  # MemoryFileError, not a traceback, for an unreadable file

        return {src: file_signature(path) for src, (path, _k) in self._files(scope).items()}

    def _parse(self, scope: str) -> list[MemoryUnit]:
        from memclaw.markdown.files import read_units

        units: list[MemoryUnit] = []
        for src, (path, kind) in self._files(scope).items():
            if path.exists():
                units.extend(read_units(path, scope=scope, kind=kind, source=src))
        return units

    # ----- index lifecycle -------------------------------------------------------------------------------
    def _check_manifest(self) -> None:
        """Full rebuild when the embedder, tokenizer or store changed (said in one line: why, and how many memories
        that embeds), or the manifest is missing/unreadable. A moved workspace keeps its index. The index changes
        embedding model only once the new one embeds (`cannot_embed`); until then the old identity and vectors
        stay, new vectors are pending and recall uses BM25 alone."""
        if self._manifest_checked:
            return
        want = self._fingerprints()
        have = ix.read_manifest(self.layout)
        reason, copied = self._mismatch(have, want)
        if have is not None and have.get("embedder") != want["embedder"]:
            from memclaw.embedding.provider import cannot_embed

            self._deferred = cannot_embed(self.embedder)
            if self._deferred is not None:  # the old index stays as it is until the new model embeds
                log.info("%s, but %s: the index keeps the previous model until then", reason, self._deferred)
                return
        if copied:
            self._join_prefetch()
            self._namespace, self._store = self._path_namespace(), None  # the original keeps its collections
            self._probed.clear()
        if have is None or reason:
            if reason:
                n = sum(len(self._parse(s)) for s in self.workspace.scopes())
                log.warning("rebuilding the index: %s; %d memories to embed", reason, n)
            self._wipe_index()
        else:
            ix.drop_legacy_state(self.layout)
        manifest = {**want, "namespace": self.namespace, "workspace": str(self.workspace.root.resolve())}
        if have is not None and not reason and "dimensions" in have:
            manifest["dimensions"] = have["dimensions"]
        if manifest != have:
            ix.write_manifest(self.layout, manifest)
        self._manifest_checked = True

    def _wipe_index(self) -> None:
        self._join_prefetch()  # its error, if any, concerned the index being wiped
        self._sync_wrote = True
        with self._lock:
            self._scopes.clear()
        if self.config.memory.chroma_url:
            for scope in self._known_scopes_on_disk():
                self.store.drop(scope)
        else:
            from memclaw.store.clients import release_embedded

            self._store = None
            release_embedded(self.layout.chroma_dir)
            ix.remove_tree(self.layout.chroma_dir)
        self._probed.clear()
        ix.remove_tree(self.layout.root / "scopes")
        manifest = ix.read_manifest(self.layout)
        if manifest is not None and "dimensions" in manifest:  # the next vectors say it again
            del manifest["dimensions"]
            ix.write_manifest(self.layout, manifest)

    def _record_dimensions(self, dim: int) -> None:
        """The vectors' size, recorded in the manifest from the first ones embedded (a provider's model tells it
        only in a response). Vectors of another size cannot join the index."""
        manifest = ix.read_manifest(self.layout) or {}
        had = manifest.get("dimensions")
        if had == dim:
            return
        if had is not None:
            raise IndexError_(
                f"the embedding model now returns {dim} dimensions, the index holds {had}; "
                "run `memclaw memory reindex` to rebuild it"
            )
        ix.write_manifest(self.layout, {**manifest, "dimensions": dim})

    def _known_scopes_on_disk(self) -> list[str]:
        from memclaw.index.scope_state import read_scope_name

        out = set(self.workspace.scopes())
        root = self.layout.root / "scopes"
        if root.is_dir():
            for d in root.iterdir():
                name = read_scope_name(d / ix.STATE_FILE)
                if name:
                    out.add(name)
        return sorted(out)

    def _load_scope(self, scope: str) -> _Scope | None:
        """Load a scope's saved state and BM25 index; None if absent or corrupted (caller rebuilds)."""
        from memclaw.index import scope_state

        sf = self.layout.state_file(scope)
        sig = scope_state.file_sig(sf)
        try:
            loaded = scope_state.load(sf)
        except IndexError_ as e:
            if not sf.is_file():
                raise  # not memclaw's file to replace (a directory...): said in one line, with the fix
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
            sc = _Scope(state, self._build_lexical(state.units.values()), sig)
            sc.lexical_unsaved = True  # the next sync saves it (it holds the writer lock)
            return sc
        return _Scope(state, lexical, sig)

    def _build_lexical(self, units) -> LexicalIndex:
        from memclaw.index.bm25 import make_lexical_index
        from memclaw.util.progress import progress_for

        units = list(units)
        lex = make_lexical_index("inverted")
        last = 0
        with progress_for(self.progress, None, len(units), f"indexing the words of {len(units):,} memories") as done:
            for i, u in enumerate(units, 1):
                lex.add(u.id, self.tokenizer.tokenize(self._lexical_text(u)))
                if done is not None and (i % 1000 == 0 or i == len(units)):
                    done(i - last)
                    last = i
        return lex

    @staticmethod
    def _lexical_text(u: MemoryUnit) -> str:
        return u.text

    @staticmethod
    def _vector_text(u: MemoryUnit) -> str:
        return u.text

    def _get_scope(self, scope: str) -> _Scope | None:
        from memclaw.index.paths import check_layout
        from memclaw.index.scope_state import file_sig

        with self._lock:
            sc = self._scopes.get(scope)
        if sc is not None and sc.state_sig == file_sig(self.layout.state_file(scope)):
            return sc
        check_layout(self.layout, scope, embedded=not self.config.memory.chroma_url)
        sc = self._load_scope(scope)  # absent, or another process synced since
        with self._lock:
            if sc is not None:
                self._scopes[scope] = sc
            else:
                self._scopes.pop(scope, None)
        return sc

    def _never_written(self, scope: str) -> bool:
        """The scope has no memory file and no index state (a few stats: no folder or index file is made)."""
        if any(sig is not None for sig in self._signatures(scope).values()):
            return False
        try:
            return not self.layout.state_file(scope).exists()
        except OSError:
            return False  # the index cannot be looked into: the usual path reports it

    def is_fresh(self, scope: str) -> bool:
        if self.index_mismatch() is not None:
            return False
        sc = self._get_scope(scope)
        return (
            sc is not None
            and sc.state.signatures == self._signatures(scope)
            and not sc.state.pending
            and not sc.lexical_unsaved
        )

    def pending_vectors(self, scope: str) -> set[str]:
        """Ids of the scope's units whose vectors wait for the embedding provider (the next sync adds them)."""
        sc = self._get_scope(scope)
        return set(sc.state.pending) if sc is not None else set()

    # ----- sync ------------------------------------------------------------------------------------------
    def sync(
        self, scopes: Sequence[str] | None = None, *, full: bool = False, progress: ix.Progress | None = None
    ) -> list[ix.SyncReport]:
        """Bring the index in line with the Markdown. `full` rebuilds everything from scratch. Interrupted (Ctrl-C)
        after it changed the index, it tells `on_interrupt` what that left (INTERRUPTED_SYNC: the next sync finishes
        it) and lets the KeyboardInterrupt go on."""
        with self._write_lock, self.layout.writer_lock(), self._interruptible():
            return self._sync_locked(scopes, full, progress)

    def try_sync(self, scopes: Sequence[str]) -> list[ix.SyncReport] | None:
        """Like `sync`, but None at once when a sync is already running in this process or another."""
        if not self._write_lock.acquire(blocking=False):
            return None
        try:
            with self.layout.writer_lock(wait=False) as acquired, self._interruptible():
                return self._sync_locked(scopes, False, None) if acquired else None
        finally:
            self._write_lock.release()

    @contextlib.contextmanager
    def _interruptible(self) -> Iterator[None]:
        self._sync_wrote = False
        try:
            yield
        except KeyboardInterrupt:
            if self._sync_wrote and self.on_interrupt is not None:
                self.on_interrupt(INTERRUPTED_SYNC)
            raise

    def _sync_locked(
        self, scopes: Sequence[str] | None, full: bool, progress: ix.Progress | None
    ) -> list[ix.SyncReport]:
        """The body of a sync; the caller holds both writer locks."""
        self.embed_error = None
        if full:
            from memclaw.embedding.provider import cannot_embed

            err = cannot_embed(self.embedder)
            if err is not None:  # nothing to rebuild with: keep what there is
                raise err
            self._wipe_index()
            self._manifest_checked = False
        self._check_manifest()
        targets = list(scopes) if scopes is not None else self._known_scopes_on_disk()
        try:
            if not full:
                self._probe_store(targets)
            return [self._sync_scope(s, progress) for s in targets]
        except VectorStoreCorrupted as e:
            log.warning("%s; rebuilding the index from the Markdown", _what(e))
            self._wipe_index()
            self._manifest_checked = False
            self._check_manifest()
            reports = [self._sync_scope(s, progress) for s in targets]
            for r in reports:
                r.rebuilt = True
            return reports

    def _probe_store(self, scopes: Sequence[str]) -> None:
        """Open the embedded store and read each scope's collection (a count and a 1-NN query, which loads the
        HNSW segment), so that damaged Chroma files raise VectorStoreCorrupted here, where sync can rebuild them,
        even when every scope is fresh. A Chroma server's files are the server's business: no probe."""
        if self.config.memory.chroma_url:
            return
        probe = None
        store = self.store
        for scope in scopes:
            if (id(store), scope) in self._probed:  # once per opening: later damage fails the write that meets it
                continue
            if store.count(scope):
                if probe is None:  # the recorded dimensions: a provider's embedder need not be asked
                    dim = (ix.read_manifest(self.layout) or {}).get("dimensions") or self.embedder.dim
                    probe = np.zeros(int(dim), dtype=np.float32)
                    probe[0] = 1.0
                store.query(scope, probe, 1)
            self._probed.add((id(store), scope))

    def _read_scope(self, scope: str, old: _Scope | None, signatures: dict[str, tuple | None]) -> _ScopeRead:
        """The scope's units as the Markdown holds them now, reading as little as possible: a file whose
        signature is unchanged keeps its rows; a file that was only appended to has just its tail parsed
        (memclaw.markdown.incremental, exact); any other file is parsed in full."""
        from memclaw.index.few_lookups import FewLookups
        from memclaw.markdown.files import read_bytes
        from memclaw.markdown.incremental import parse_appended, parse_file
        from memclaw.markdown.memory_md import ParseNote, describe_notes
        from memclaw.util.progress import progress_for

        out = _ScopeRead()
        for src, (path, kind) in self._files(scope).items():
            seg = mark = None
            if old is not None:
                seg = old.state.units.segment(src)
                mark = old.state.marks.get(src)
                if seg is None:  # rows not in file order (never written so): diff the whole table
                    out.full_diff = True
            sig = signatures[src]
            if seg is not None and mark is not None and sig is not None and old.state.signatures.get(src) == sig:
                out.add(seg, [], None)
                out.marks[src] = mark
                continue
            data = read_bytes(path) if sig is not None else None
            if data is None:
                if seg is not None:
                    out.reread_old.update(seg.ids)
                continue
            tail = None
            notes: list[ParseNote] = []
            if seg is not None and mark is not None:
                tail = parse_appended(data, mark, kind=kind, scope=scope, source=src, known=FewLookups(seg.ids),
                                      notes=notes)  # fmt: skip
            if tail is not None:
                units, out.marks[src] = tail
                out.add(seg, [], None)
            else:
                with progress_for(self.progress, None, 0, f"reading {src} ({len(data) / 1e6:.0f} MB)"):
                    units, out.marks[src] = parse_file(data, kind=kind, scope=scope, source=src, notes=notes)
                out.full_parse = True
                if seg is not None:
                    out.reread_old.update(seg.ids)
            for warning in describe_notes(src, notes):  # said when the file is read after a change, not on each recall
                log.warning("%s", warning)
            if units:
                out.add(None, units, [u.content_hash for u in units], src)
        return out

    def _sync_scope(self, scope: str, progress: ix.Progress | None) -> ix.SyncReport:
        from memclaw.index import scope_state
        from memclaw.index.paths import check_layout
        from memclaw.index.unittable import UnitTable
        from memclaw.index.vector_writer import Passage, write_vectors
        from memclaw.util.progress import progress_for

        report = ix.SyncReport(scope)
        signatures = self._signatures(scope)
        old = self._get_scope(scope)
        check_layout(self.layout, scope, embedded=not self.config.memory.chroma_url)
        dirty = self.layout.dirty_file(scope)
        in_store_passages: set[str] = set()
        if old is not None and old.state.signatures == signatures and not old.state.pending and not old.lexical_unsaved:
            report.unchanged = len(old.state.units)
            return report
        read = self._read_scope(scope, old, signatures)
        table = UnitTable.concat(read.parts) if read.parts else UnitTable.from_units([])
        units = read.parsed  # the only units that can be new or changed
        hashes = dict(zip((u.id for u in units), read.parsed_hashes, strict=True))
        if old is None:
            desired = {u.id: u for u in units}
            # No trustworthy state: reconcile with whatever the vector store holds (re-embed only what's missing).
            report.rebuilt = True
            try:
                in_store_passages = self.store.ids(scope)
            except VectorStoreCorrupted:
                raise  # the whole store is damaged: sync rebuilds every scope
            except IndexError_ as e:
                report.warnings.append(f"{e}; dropping the scope's vectors")
                self.store.drop(scope)
                in_store_passages = set()
            in_store = {unit_of(pid) for pid in in_store_passages}
            # A unit counts as present only if all its passages are (a crash may have left some out).
            old_hashes = {
                i: hashes[i]
                for i in in_store
                if i in desired and set(_passages_of(desired[i], self)) <= in_store_passages
            }
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
        if old is not None and old.state.pending:  # catch up: vectors the provider could not give last time
            queued = {u.id for u in to_embed}
            to_embed += [table[i] for i in sorted(old.state.pending) if i in table and i not in queued]

        # Passages: a long unit is embedded as several vectors (see memclaw.index.passages).
        passages = [
            Passage(pid, text, _metadata(u), u.id)
            for u in to_embed
            for pid, text in unit_vectors(u.id, self._vector_text(u))
        ]
        new_pids = {p.id for p in passages}
        stale_passages: set[str] = set()
        if old is None:
            if in_store_passages:  # (an empty store, e.g. after a wipe, has nothing stale)
                stale_passages = in_store_passages - {pid for u in units for pid in _passages_of(u, self)}
        else:
            old_units = old.state.units
            for uid in stale_in_store:
                stale_passages.update(_passages_of(old_units[uid], self))
            for u in to_embed:  # (only a unit parsed again in full, or pending, can be an old one)
                if (u.id in old_hashes or u.id in old.state.pending) and u.id in old_units:
                    stale_passages.update(set(_passages_of(old_units[u.id], self)) - new_pids)

        def mark_dirty() -> None:  # before the first write: a crash from here on makes the next sync reconcile
            dirty.parent.mkdir(parents=True, exist_ok=True)
            dirty.touch()
            self._sync_wrote = True

        pending: set[str] = set()
        if passages:
            if self._deferred is not None:  # not the index's model: its vectors cannot join this index
                pending, err = {p.unit for p in passages}, self._deferred
            else:
                embedder, store = self.embedder, self.store  # (loaded before the progress clock starts)
                shown = progress_for(self.progress, progress, len(passages), f"embedding {len(to_embed):,} memories")
                with shown as advance:
                    pending, err = write_vectors(
                        embedder, store, scope, passages, batch_size=self.config.embeddings.batch_size,
                        progress=advance, before_write=mark_dirty, on_dimensions=self._record_dimensions,
                    )  # fmt: skip
            if err is not None:  # keyword search gets the units now, the vectors come later
                self.embed_error = err
                if old is not None:  # an edited unit's old vector must not answer for its new text
                    old_units = old.state.units
                    for uid in pending:
                        if uid in old_units:
                            stale_passages.update(_passages_of(old_units[uid], self))
                msg = (
                    f"{err}; {len(pending)} memories are searchable by keyword now, their vectors come at the next sync"
                )
                report.warnings.append(msg)
                log.warning(msg)
        report.pending = len(pending)
        mark_dirty()
        if stale_passages:
            self.store.delete(scope, sorted(stale_passages))

        append_only = old is not None and not (read.full_parse or read.full_diff or stale_in_store)
        order = list(dict.fromkeys(p.source_at(0) for p in read.parts)) if append_only else []  # (each part: one file)
        changes = scope_state.Changes(order=order) if old is not None and not old.lexical_unsaved else None
        if old is None:
            lexical = self._build_lexical(units)
        else:
            lexical = old.lexical
            removed, added = sorted(stale_in_store), []
            with self._lock:  # in-place update; recall holds the same lock while searching
                present = lexical.ids()
                for i in removed:
                    lexical.remove(i)
                for u in to_embed:
                    if u.id in present:
                        lexical.remove(u.id)
                        removed.append(u.id)
                    tokens = self.tokenizer.tokenize(self._lexical_text(u))
                    lexical.add(u.id, tokens)
                    added.append((u.id, tokens))
            if changes is not None:
                changes.bm25_removed, changes.bm25_added = removed, added
        # only undated units appended: the session links are unchanged
        links = old.state.links if append_only and not any(u.timestamp for u in units) else _session_links(table)
        if append_only and changes is not None:
            changes.appended = read.appended
            old_links = old.state.links
            changes.links = {k: v for k, v in links.items() if old_links.get(k) != v}
            changes.links.update({k: None for k in old_links if k not in links})
        state = ix.ScopeState(scope, signatures, table, links, read.marks, pending)
        sf = self.layout.state_file(scope)

        def lexical_bytes() -> bytes:
            with self._lock:  # (compacts the live index)
                return lexical.to_bytes()

        big = changes is None and len(table) > 50_000  # (seconds of JSON: say so)
        with progress_for(self.progress, None, 0, "saving the index") if big else contextlib.nullcontext():
            scope_state.save(sf, state, lexical_bytes, changes)
        dirty.unlink(missing_ok=True)
        with self._lock:
            self._scopes[scope] = _Scope(state, lexical, scope_state.file_sig(sf))
        if report.changed:
            log.info("synced %s: +%d ~%d -%d", scope, report.added, report.updated, report.removed)
        return report

    def ensure_fresh(self, scope: str, *, wait: bool = True) -> bool:
        """Sync `scope` if its Markdown changed. With `wait=False` a sync already running elsewhere is not waited
        for (once the scope has a synced state): False, and the caller reads the previous state."""
        if self.is_fresh(scope):
            return True
        if wait or self._get_scope(scope) is None:
            self.sync([scope])
            return True
        return self.try_sync([scope]) is not None

    # ----- recall ----------------------------------------------------------------------------------------
    def recall(
        self,
        query: str,
        *,
        scope: str = OWNER_SCOPE,
        k: int | None = None,
        mode: str | None = None,
        kind: str | None = None,
    ) -> list[RecallHit]:
        return self.recall_detailed(query, scope=scope, k=k, mode=mode, kind=kind).hits

    def recall_detailed(
        self,
        query: str,
        *,
        scope: str = OWNER_SCOPE,
        k: int | None = None,
        mode: str | None = None,
        kind: str | None = None,
        now: datetime | None = None,
    ) -> RecallResult:
        rc = self.config.recall
        k = k or rc.k
        mode = mode or rc.mode
        if mode not in ("hybrid", "bm25", "vector"):
            raise UsageError(f"unknown recall mode {mode!r}: use hybrid, bm25 or vector")
        if kind not in (None, "fact", "history"):
            raise UsageError(f"unknown memory kind {kind!r}: use fact or history")
        if not query or not query.strip() or not self.tokenizer.tokenize(query):
            raise NothingToRecall()  # a vector of "the and of" would only bring back an arbitrary memory
        result = RecallResult(query, scope, mode, [])
        if self._never_written(scope):  # e.g. an unknown sender: nothing to recall, and a read writes nothing
            return result
        t0 = time.perf_counter()
        if mode != "bm25":
            self.prefetch_store(scope)  # a no-op once the store is open
        # the vectors' side is down: said once, and not asked twice (a frozen server costs a timeout each time)
        store_down: VectorStoreUnavailable | EmbeddingUnavailable | None = None
        if self.config.memory.auto_sync:
            try:
                if not self.ensure_fresh(scope, wait=False):
                    result.warnings.append("a sync is running; recalled from the previous index state")
            except (VectorStoreUnavailable, EmbeddingUnavailable) as e:
                store_down = e
            except BaseException:
                self._join_prefetch()  # never exit while the store is being opened in the background (it crashes)
                raise
        sc = self._get_scope(scope)
        result.timings_ms["sync_check"] = (time.perf_counter() - t0) * 1000
        if store_down is not None and (mode == "bm25" or sc is None or not sc.state.units):
            result.warnings.append(f"{store_down}; recalling from the last synced state")
        if sc is None or not sc.state.units:
            return result
        n_cand = max(rc.candidates, k * 3)
        bm25_hits: list[tuple[str, float]] = []
        vec_hits: list[tuple[str, float]] = []
        if mode in ("hybrid", "bm25"):
            t = time.perf_counter()
            tokens = self.tokenizer.tokenize(query)
            with self._lock:
                bm25_hits = list(sc.lexical.search(tokens, n_cand)) if tokens else []
            result.timings_ms["bm25"] = (time.perf_counter() - t) * 1000
        if mode in ("hybrid", "vector"):
            from memclaw.embedding.load import encode_query

            down = store_down or self._deferred  # (the index's vectors are another model's)
            t = time.perf_counter()
            qv = None
            if down is None:
                try:
                    qv = encode_query(self.embedder, query)
                except EmbeddingUnavailable as e:  # the provider is down: as for a Chroma outage
                    down = e
            result.timings_ms["embed"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            if down is None:
                try:
                    vec_hits = self._unit_similarities(sc, self.store.query(scope, qv, n_cand * 2))
                except VectorStoreUnavailable as e:
                    down = e
                except VectorStoreCorrupted as e:
                    vec_hits = self._query_after_repair(scope, qv, n_cand * 2, e, result, mode)
            if down is not None:
                if mode == "vector":
                    raise down
                result.warnings.append(f"{down}; recall fell back to BM25 only")
                result.mode = "bm25-only"
                log.warning("%s; recall fell back to BM25 only", down)
            result.timings_ms["vector"] = (time.perf_counter() - t) * 1000
        units = sc.state.units
        result.scope_size = sum(u.kind == kind for u in units.values()) if kind else len(units)
        bm25_hits = [(i, s) for i, s in bm25_hits if i in units]
        vec_hits = [(i, s) for i, s in vec_hits if i in units]  # ignore vectors orphaned by a crash
        params = FusionParams(
            method=rc.fusion,
            rrf_k=rc.rrf_k,
            bm25_weight=rc.bm25_weight,
            vector_weight=rc.vector_weight,
            min_similarity=rc.min_similarity,
            min_bm25=rc.min_bm25,
        )
        bm25_hits, vec_hits = apply_floors(bm25_hits, vec_hits, params)
        fused = fuse(bm25_hits, vec_hits, params)
        ranges = find_date_ranges(query, now or datetime.now()) if rc.date_weight > 0 else []
        if ranges:
            narrow = [r for r in ranges if r.days <= DATE_ONLY_MAX_DAYS]
            extra = [i for i in sc.dated_in(narrow, n_cand) if not kind or units[i].kind == kind] if narrow else []
            stamps = {i: units[i].timestamp for i in [*(f.id for f in fused), *extra]}
            fused = date_boost(fused, stamps, ranges, weight=rc.date_weight, extra=extra)
            result.date_ranges = ranges
        if rc.link_sessions and sc.state.links:
            fused = link_boost(fused, sc.state.links, weight=rc.link_weight)
        if rc.recency_half_life_days:
            hit_units = {f.id: units[f.id] for f in fused}
            fused = recency_boost(
                fused,
                {i: u.timestamp for i, u in hit_units.items()},
                {i: u.kind for i, u in hit_units.items()},
                now=now or datetime.now(),
                half_life_days=rc.recency_half_life_days,
                weight=RECENCY_WEIGHT,
            )
        links = sc.state.links if rc.link_sessions else {}
        seen_text: set[str] = set()
        for f in fused:
            u = units[f.id]
            if kind and u.kind != kind:
                continue
            key = " ".join(u.text.lower().split())
            if key in seen_text:
                continue
            seen_text.add(key)
            result.hits.append(
                RecallHit(
                    u,
                    f.score,
                    Signal(f.bm25_rank, f.bm25_score),
                    Signal(f.vector_rank, f.vector_similarity),
                    dict(f.boosts),
                    tuple(links.get(f.id, ())),
                )
            )
            if len(result.hits) >= k:
                break
        result.timings_ms["total"] = (time.perf_counter() - t0) * 1000
        return result

    def _unit_similarities(self, sc: _Scope, hits) -> list[tuple[str, float]]:
        units = sc.state.units
        return _best_per_unit(
            hits, self.config.recall.vector_signal, lambda uid: uid in units and is_long(units[uid].text)
        )

    def _query_after_repair(
        self, scope: str, qv: np.ndarray, n: int, err: VectorStoreCorrupted, result: RecallResult, mode: str
    ) -> list[tuple[str, float]]:
        """Recall met damaged Chroma files: rebuild the index from the Markdown (if auto_sync) and query again;
        otherwise, or if that fails too, answer from BM25 alone."""
        if self.config.memory.auto_sync:
            msg = f"{_what(err)}; rebuilt the index from the Markdown"
            log.warning(msg)
            result.warnings.append(msg)
            try:
                self.sync([scope], full=True)
                sc = self._get_scope(scope)
                return self._unit_similarities(sc, self.store.query(scope, qv, n)) if sc else []
            except (IndexError_, VectorStoreUnavailable) as e:
                err = e  # type: ignore[assignment]
        if mode == "vector":
            raise err
        result.warnings.append(f"{err}; recall fell back to BM25 only")
        log.warning("%s; recall fell back to BM25 only", err)
        return []

    # ----- writes ----------------------------------------------------------------------------------------
    def facts(self, scope: str = OWNER_SCOPE) -> list[MemoryUnit]:
        return [u for u in self._parse(scope) if u.kind == "fact"]

    def add_fact(self, text: str, *, scope: str = OWNER_SCOPE, section: str | None = None) -> MemoryUnit:
        from memclaw.markdown.fact_ops import append_fact, normalize_fact_text
        from memclaw.markdown.unit_size import too_long

        text = normalize_fact_text(text)  # as it will read back (undecodable bytes, comment openers defused)
        if not text:
            raise UsageError("empty fact: say what to remember")
        refused = too_long(text)
        if refused:
            raise UsageError(refused)
        path = self.workspace.memory_file(scope)
        if self.find_fact(text, scope=scope, section=section) is None:  # a re-run does not write it twice
            self._check_other_files(scope, path)
            path.parent.mkdir(parents=True, exist_ok=True)
            append_fact(path, text, section=section, mark=self._mark(scope, path))
        try:
            self.sync([scope])
        except (VectorStoreUnavailable, IndexError_, PermissionError) as e:
            err = from_permission_error(e) if isinstance(e, PermissionError) else e
            raise type(err)(f"{err} (the fact is saved in {path}; the next sync indexes it)") from e
        sc = self._get_scope(scope)
        if sc is not None:
            match = sc.state.units.last_match("fact", text)
        else:
            match = next((u for u in reversed(self._parse(scope)) if u.kind == "fact" and u.text == text), None)
        if match is None:
            raise IndexError_(f"the fact was written to {path} but could not be read back; check the file")
        return match

    def find_fact(self, text: str, *, scope: str = OWNER_SCOPE, section: str | None = None) -> MemoryUnit | None:
        """The fact `add_fact(text, section=section)` would write again: the scope's last fact with this text, if
        it is under that section (DEFAULT_SECTION when None). From the synced state when MEMORY.md has not changed
        since, else from the file. (The same text under another heading is another fact.)"""
        from memclaw.markdown.fact_ops import DEFAULT_SECTION, normalize_fact_text
        from memclaw.markdown.formats import normalize_section

        text = normalize_fact_text(text)
        path = self.workspace.memory_file(scope)
        sc = self._get_scope(scope)
        src = self.workspace.source_of(path)
        if sc is not None and src in sc.state.signatures and sc.state.signatures[src] == self._signatures(scope)[src]:
            last = sc.state.units.last_match("fact", text)
        else:
            last = next((u for u in reversed(self.facts(scope)) if u.text == text), None)
        return last if last is not None and last.section == (normalize_section(section) or DEFAULT_SECTION) else None

    def _check_other_files(self, scope: str, path: Path) -> None:
        """Before writing `path`: refuse (MemoryFileError) if another file of the scope that changed since the
        last sync cannot be read or is not text, so that a write is never followed by a failing sync."""
        from memclaw.markdown.files import read_bytes

        sc = self._get_scope(scope)
        sigs = self._signatures(scope)
        for src, (other, _kind) in self._files(scope).items():
            if other != path and sigs[src] is not None and (sc is None or sc.state.signatures.get(src) != sigs[src]):
                read_bytes(other)

    def _mark(self, scope: str, path: Path) -> FileMark | None:
        """The synced state's mark of a memory file (what the append fast path of memfiles checks against)."""
        sc = self._get_scope(scope)
        return sc.state.marks.get(self.workspace.source_of(path)) if sc is not None else None

    def apply_fact_ops(self, scope: str, ops: list[FactOp]) -> Any:
        from memclaw.markdown.fact_ops import apply_fact_ops

        path = self.workspace.memory_file(scope)
        path.parent.mkdir(parents=True, exist_ok=True)
        result = apply_fact_ops(path, scope, self.workspace.source_of(path), ops)
        self.sync([scope])
        return result

    def append_history(self, scope: str, text: str, ts: datetime) -> MemoryUnit:
        from memclaw.markdown.history_file import append_history

        path = self.workspace.history_file(scope)
        path.parent.mkdir(parents=True, exist_ok=True)
        append_history(path, ts, text)
        self.sync([scope])
        sc = self._get_scope(scope)
        last = sc.state.units.last("history") if sc is not None else None
        if last is None:
            last = [u for u in self._parse(scope) if u.kind == "history"][-1]
        return last

    def list_units(self, scope: str = OWNER_SCOPE, kind: str | None = None) -> list[MemoryUnit]:
        """Every memory of a scope as the Markdown holds it now, in file order (facts, then history); reads only."""
        if kind not in (None, "fact", "history"):
            raise UsageError(f"unknown memory kind {kind!r}: use fact or history")
        return [u for u in self._parse(scope) if kind is None or u.kind == kind]

    def forget(self, ids: Sequence[str], *, scope: str = OWNER_SCOPE) -> list[MemoryUnit]:
        """Remove these memories (ids as `list_units` and recall give them) from the Markdown, then from the index.
        Every id is checked before anything is written. Returns the forgotten memories."""
        from memclaw.markdown.fact_ops import FactOp, apply_fact_ops
        from memclaw.markdown.history_file import delete_history_entries
        from memclaw.service.forgotten import note_forgotten

        current = {u.id: u for u in self._parse(scope)}
        ids = list(dict.fromkeys(ids))
        for i in ids:
            if i not in current:
                raise UsageError(
                    f"no memory with id {i!r} in scope {scope}: use an id from `memclaw memory list` or "
                    "`memclaw recall --json` (an id changes when its text is edited)"
                )
        facts = [i for i in ids if current[i].kind == "fact"]
        history = [i for i in ids if current[i].kind == "history"]
        if facts:
            path = self.workspace.memory_file(scope)
            apply_fact_ops(path, scope, self.workspace.source_of(path), [FactOp("delete", id=i) for i in facts])
        if history:
            path = self.workspace.history_file(scope)
            delete_history_entries(path, scope, self.workspace.source_of(path), history)
        gone = [current[i] for i in ids]
        note_forgotten(self.workspace.sessions_dir, gone)  # so that no chat that said them writes them back
        self.sync([scope])
        return gone

    # ----- stats -----------------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        scopes = {}
        for scope in self._known_scopes_on_disk():
            units = self._parse(scope)
            sc = self._get_scope(scope)
            counts: dict[str, int] = defaultdict(int)
            for u in units:
                counts[u.kind] += 1
            scopes[scope] = {
                "facts": counts["fact"],
                "history": counts["history"],
                "indexed": len(sc.state.units) if sc else 0,
                "fresh": bool(sc and sc.state.signatures == self._signatures(scope) and not sc.state.pending),
                "vectors_pending": len(sc.state.pending) if sc else 0,
            }
        manifest = ix.read_manifest(self.layout) or {}
        rebuild = self.index_mismatch()
        if rebuild is not None:
            for s in scopes.values():
                s["fresh"] = False
        url = self.config.memory.chroma_url
        return {
            "workspace": str(self.workspace.root),
            "index_dir": str(self.layout.root),
            "store": redact_url(url) if url else str(self.layout.chroma_dir),
            "index_store": redact_url(manifest["store"]) if manifest.get("store") else None,  # an older manifest's
            "rebuild": redact_url(rebuild) if rebuild else None,  # URL may hold credentials
            "model": self.config.embeddings.model,
            "embedder_fingerprint": manifest.get("embedder"),
            "tokenizer_fingerprint": manifest.get("tokenizer"),
            "scopes": scopes,
        }

    def close(self) -> None:
        self._join_prefetch()
        with self._lock:
            self._scopes.clear()


def _what(e: Exception) -> str:
    """An error's message without its 'run ... to fix it' advice (for warnings about a repair memclaw makes)."""
    return str(e).split("; run `memclaw memory reindex`")[0]


def _best_per_unit(hits, signal: str = "max", is_long: Callable[[str], bool] | None = None) -> list[tuple[str, float]]:
    """Vector hits (best first) -> unit hits (see memclaw.index.passages): a unit's similarity is its best vector's
    (`max`), its best passage's (`passages`: heads ignored), or its head's (`head`: a long unit's head vector, a
    short unit's only vector; `is_long(unit_id)` tells them apart)."""
    best: dict[str, float] = {}
    for h in hits:
        uid = unit_of(h.id)
        if uid in best:
            continue
        head = is_head(h.id)
        if signal == "passages" and head:
            continue
        if signal == "head" and not head and (h.id != uid or (is_long is not None and is_long(uid))):
            continue
        best[uid] = h.similarity
    return list(best.items())


def _passages_of(u: MemoryUnit, svc: MemoryService) -> list[str]:
    return [pid for pid, _t in unit_vectors(u.id, svc._vector_text(u))]


def _metadata(u: MemoryUnit) -> dict[str, Any]:
    md: dict[str, Any] = {"kind": u.kind, "source": u.source, "line": u.line}
    if u.timestamp:
        md["ts"] = u.timestamp.isoformat()
    return md


def _session_links(table: UnitTable) -> dict[str, list[str]]:
    """Link each dated fact to the history entries of the same day (its session's summary)."""
    by_day: dict[str, list[str]] = defaultdict(list)
    dated_facts: list[tuple[str, str]] = []
    ids = table.ids
    for row, kind, ts in table.dated_rows():
        day = ts[:10]  # the isoformat's date, as timestamp.date().isoformat()
        if kind == "history":
            by_day[day].append(ids[row])
        else:
            dated_facts.append((ids[row], day))
    links: dict[str, list[str]] = {}
    for uid, day in dated_facts:
        targets = by_day.get(day)
        if targets:
            links[uid] = targets
    return links
