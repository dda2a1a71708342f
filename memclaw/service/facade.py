"""MemoryService: one workspace's Markdown memory, its derived index, and hybrid recall over it.

The facade that wires the parts: the seams (embedder, vector store, opened in the background by `prefetch_store`),
the index's identity (memclaw.index.identity), the scope cache (memclaw.index.scopes), the sync of a scope
(memclaw.index.sync), recall (memclaw.recall.search), writes (memclaw.service._writes) and stats. The Markdown is the
source of truth. Writes go to the Markdown first (atomically), then the index syncs. Recall auto-syncs a scope when
its files changed (edits by hand or by the agent's file tools included).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from memclaw.config import Config, config_secrets
from memclaw.errors import EmbeddingUnavailable, VectorStoreCorrupted
from memclaw.index import layout as ix
from memclaw.index.identity import IndexIdentity, what_broke
from memclaw.index.scopes import ScopeCache
from memclaw.index.sync import ScopeSync, SyncReport
from memclaw.markdown.units import OWNER_SCOPE, MemoryUnit
from memclaw.recall.results import RecallHit, RecallOptions, RecallResult
from memclaw.recall.search import Recall
from memclaw.service._writes import MemoryWriter
from memclaw.service.consolidation_record import STEPS, ConsolidationRecord, ConsolidationWriter, RecordResult
from memclaw.service.forgotten import Forgot, ForgottenFilter
from memclaw.util.background import background_thread
from memclaw.util.redact import redact_url, remember_secrets

if TYPE_CHECKING:
    from collections.abc import Iterator

    from memclaw.embedding.base import Embedder
    from memclaw.index.tokenizer import Tokenizer
    from memclaw.store.base import VectorStore
    from memclaw.util.progress import ProgressFactory
    from memclaw.workspace import Workspace

log = logging.getLogger(__name__)

INTERRUPTED_SYNC = (
    "interrupted: the index is incomplete (the Markdown is intact, and what was embedded is kept); "
    "the next memclaw command finishes it"
)


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
        # every text written to memory is masked for the config's secrets too (load_config remembers them; a
        # config made in code, as a library user or a test does, is remembered here)
        remember_secrets(config_secrets(config))
        self._embedder = embedder
        self._store = store
        if tokenizer is None:
            from memclaw.index.tokenizer import Tokenizer

            tokenizer = Tokenizer()
        self.tokenizer = tokenizer
        self.layout = ix.IndexLayout(Path(config.memory.index_dir or workspace.index_dir))
        self.layout.check_ours()
        self.scopes = ScopeCache(workspace, self.layout, tokenizer, config)
        self.identity = IndexIdentity(
            self.layout, workspace.root, config, tokenizer, lambda: self.embedder, lambda: self._embedder
        )
        self._syncer = ScopeSync(
            self.scopes, self.identity, store=lambda: self.store, embedder=lambda: self.embedder,
            wrote=self._wrote, embed_failed=self._embed_failed,
        )  # fmt: skip
        self._recall = Recall(
            config, tokenizer, self.scopes, self.identity, embedder=lambda: self.embedder, store=lambda: self.store,
            prefetch=self.prefetch_store,
            ensure_fresh=lambda scope, vectors=True: self.ensure_fresh(scope, wait=False, vectors=vectors),
            rebuild=lambda scope: self.sync([scope], full=True),
            screen=lambda result: self._forgotten.apply(result),
        )  # fmt: skip
        self._writer = MemoryWriter(self.scopes, self.sync)
        self._forgotten = ForgottenFilter(workspace.sessions_dir, self.tokenizer.tokenize, self.scopes.doc_freq)
        self._recorder = ConsolidationWriter(workspace, config, self.sync)
        # one sync at a time in this process
        self._write_lock = threading.Lock()
        # why the last sync left vectors pending, if it did
        self.embed_error: EmbeddingUnavailable | None = None
        # one opening of the vector store
        self._store_lock = threading.Lock()
        # its error re-raised in the caller's thread by `store`
        self._prefetch: Prefetch | None = None
        # told what an interrupted sync left (the CLI says it)
        self.on_interrupt: Callable[[str], None] | None = None
        # the running sync has changed the index (an interrupt leaves it incomplete)
        self._sync_wrote = False
        # (store, scope) read once for damage (probe_damage)
        self._probed: set[tuple[int, str]] = set()

    @property
    def progress(self) -> ProgressFactory | None:
        """Shows long embedding and indexing work (the CLI: memclaw.util.progress)."""
        return self.scopes.progress

    @progress.setter
    def progress(self, value: ProgressFactory | None) -> None:
        self.scopes.progress = value

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
        # what opening the store would have raised here, said once
        if err is not None:
            raise err
        with self._store_lock:
            return self._open_store()

    def _join_prefetch(self) -> BaseException | None:
        """Wait for a running prefetch (not from inside it); its error, if any, handed over once."""
        p = self._prefetch
        if p is None or p.inside():
            return None
        self._prefetch = None
        return p.join()

    def prefetch_store(self, scope: str) -> None:
        """Open the vector store and load `scope`'s collection in a background thread.

        The caller meanwhile loads the unit table, BM25 and the embedder. A cold `memclaw recall` so pays the chromadb
        import and Chroma's first read alongside them instead of after. Errors surface at the next use of `store`,
        as if it had been opened there."""
        with self._store_lock:
            if self._store is None and self._prefetch is None:
                self._prefetch = Prefetch(lambda: self.store.warm(scope), "memclaw-store-prefetch")
                self._prefetch.start()

    def _open_store(self) -> VectorStore:
        if self._store is None:
            from memclaw.store.clients import embedded_files_lost, open_chroma_store

            m = self.config.memory
            headers = {k: v.get_secret_value() for k, v in m.chroma_headers.items()}
            lost = not m.chroma_url and embedded_files_lost(self.layout.chroma_dir) and self.scopes.has_states()
            self._store = open_chroma_store(
                path=None if m.chroma_url else self.layout.chroma_dir,
                url=m.chroma_url,
                headers=headers,
                namespace=self.namespace,
                timeout_s=m.chroma_timeout_s,
                small_limit=m.small_scope_vectors,
                small_ok=lambda scope: scope != OWNER_SCOPE,
            )
            # said once: sync and recall catch it and rebuild; the store itself is usable (empty)
            if lost:
                raise VectorStoreCorrupted(
                    f"the Chroma store at {self.layout.chroma_dir} is missing though the index lists memories; "
                    "run `memclaw memory reindex` to rebuild it from the Markdown"
                )
        return self._store

    @property
    def namespace(self) -> str:
        """The workspace's key in the vector store (memclaw.index.identity)."""
        return self.identity.namespace

    def index_mismatch(self) -> str | None:
        """Why the index must be rebuilt before it can serve the current settings ("the store changed", "the
        embedding model changed"...), or None."""
        return self.identity.index_mismatch()

    def parse_scope(self, scope: str) -> list[MemoryUnit]:
        """Every memory of a scope as its Markdown holds it now (facts, then history)."""
        return self.scopes.parse(scope)

    # ----- index lifecycle -------------------------------------------------------------------------------
    def _check_manifest(self) -> None:
        self.identity.check(
            count_units=lambda: sum(len(self.scopes.parse(s)) for s in self.workspace.scopes()),
            wipe=self._wipe_index,
            on_copied=self._leave_copied_store,
        )

    def _leave_copied_store(self) -> None:
        self._join_prefetch()
        # the original keeps its collections
        self._store = None
        self._probed.clear()

    def _wipe_index(self) -> None:
        from memclaw.store.clients import wipe_vectors

        # its error, if any, concerned the index being wiped
        self._join_prefetch()
        self._sync_wrote = True
        self.scopes.clear()
        released = wipe_vectors(
            url=self.config.memory.chroma_url,
            path=self.layout.chroma_dir,
            scopes=self.scopes.known_scopes_on_disk,
            store=lambda: self.store,
        )
        if released:
            self._store = None
        self._probed.clear()
        self.identity.wipe_derived()

    def is_fresh(self, scope: str) -> bool:
        if self.index_mismatch() is not None:
            return False
        return self.scopes.is_synced(scope)

    def pending_vectors(self, scope: str) -> set[str]:
        """Ids of the scope's units whose vectors wait for the embedding provider (the next sync adds them)."""
        return self.scopes.pending(scope)

    # ----- sync ------------------------------------------------------------------------------------------
    def sync(
        self, scopes: Sequence[str] | None = None, *, full: bool = False, progress: ix.Progress | None = None
    ) -> list[SyncReport]:
        """Bring the index in line with the Markdown. `full` rebuilds everything from scratch. Interrupted (Ctrl-C)
        after it changed the index, it tells `on_interrupt` what that left (INTERRUPTED_SYNC: the next sync finishes
        it) and lets the KeyboardInterrupt go on."""
        with self._write_lock, self.layout.writer_lock(), self._interruptible():
            return self._sync_locked(scopes, full, progress)

    def try_sync(self, scopes: Sequence[str], *, vectors: bool = True) -> list[SyncReport] | None:
        """Like `sync`, but None at once when a sync is already running in this process or another. Without
        `vectors`, the units and the BM25 index are synced and every new vector is left pending (nothing embedded)."""
        if not self._write_lock.acquire(blocking=False):
            return None
        try:
            with self.layout.writer_lock(wait=False) as acquired, self._interruptible():
                return self._sync_locked(scopes, False, None, vectors=vectors) if acquired else None
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

    # the running sync is about to change the index
    def _wrote(self) -> None:
        self._sync_wrote = True

    def _embed_failed(self, err: EmbeddingUnavailable) -> None:
        self.embed_error = err

    def _sync_locked(
        self, scopes: Sequence[str] | None, full: bool, progress: ix.Progress | None, *, vectors: bool = True
    ) -> list[SyncReport]:
        """The body of a sync; the caller holds both writer locks."""
        from memclaw.store.clients import probe_damage

        self.embed_error = None
        if full:
            from memclaw.embedding.provider import cannot_embed

            err = cannot_embed(self.embedder)
            # nothing to rebuild with: keep what there is
            if err is not None:
                raise err
            self._wipe_index()
            self.identity.checked = False
        self._check_manifest()
        targets = list(scopes) if scopes is not None else self.scopes.known_scopes_on_disk()
        try:
            # keyword search only: the vector store is neither probed nor written
            if not vectors:
                return [self._syncer.sync_scope(s, progress, vectors=False) for s in targets]
            # damaged Chroma files raise here, where sync can rebuild them, even if all is fresh
            if not full:
                probe_damage(
                    url=self.config.memory.chroma_url, store=lambda: self.store, scopes=targets, probed=self._probed,
                    # a provider: not asked
                    dimensions=lambda: self.identity.dimensions() or self.embedder.dim,
                )  # fmt: skip
            return [self._syncer.sync_scope(s, progress) for s in targets]
        except VectorStoreCorrupted as e:
            log.warning("%s; rebuilding the index from the Markdown", what_broke(e))
            self._wipe_index()
            self.identity.checked = False
            self._check_manifest()
            reports = [self._syncer.sync_scope(s, progress) for s in targets]
            for r in reports:
                r.rebuilt = True
            return reports

    def ensure_fresh(self, scope: str, *, wait: bool = True, vectors: bool = True) -> bool:
        """Sync `scope` if its Markdown changed. With `wait=False` a sync already running elsewhere is not waited
        for (once the scope has a synced state): False, and the caller reads the previous state. Without `vectors`
        (a BM25 recall) pending vectors are not waited for, and new units get none now (memclaw.index.sync)."""
        if self.is_fresh(scope):
            return True
        if not vectors:
            sc = self.scopes.get(scope)
            if sc is not None and sc.state.signatures == self.scopes.signatures(scope) and not sc.lexical_unsaved:
                return True
            return self.try_sync([scope], vectors=False) is not None or self._sync_lexical(scope)
        if wait or self.scopes.get(scope) is None:
            self.sync([scope])
            return True
        return self.try_sync([scope]) is not None

    def _sync_lexical(self, scope: str) -> bool:
        """A keyword-only sync of a scope with no state yet, waiting for a running sync; False if it has one."""
        if self.scopes.get(scope) is not None:
            return False
        with self._write_lock, self.layout.writer_lock(), self._interruptible():
            self._sync_locked([scope], False, None, vectors=False)
        return True

    # ----- recall ----------------------------------------------------------------------------------------
    def recall(self, query: str, **options: Unpack[RecallOptions]) -> list[RecallHit]:
        """The hits of `recall_detailed(query, **options)`."""
        return self.recall_detailed(query, **options).hits

    def recall_detailed(self, query: str, *, scope: str = OWNER_SCOPE, k: int | None = None, mode: str | None = None,
                        kind: str | None = None, now: datetime | None = None, as_of: datetime | None = None,
                        exclude: Collection[str] = (), rerank: bool = True) -> RecallResult:  # fmt: skip
        """`as_of` / `exclude`: no unit dated after `as_of`, and none of the ids in `exclude`, is a candidate.
        `rerank`: False leaves the configured re-ranker (recall.rerank) out."""
        result = self._recall.recall(query, scope=scope, k=k, mode=mode, kind=kind, now=now, as_of=as_of,
                                     exclude=exclude, rerank=rerank)  # fmt: skip
        # Archived turns that restate what the owner forgot
        return self._forgotten.apply(result)

    # ----- writes (memclaw.service._writes) ---------------------------------------------------------------
    def facts(self, scope: str = OWNER_SCOPE) -> list[MemoryUnit]:
        return self._writer.facts(scope)

    def add_fact(self, text: str, *, scope: str = OWNER_SCOPE, section: str | None = None,
                 learned: date | None = None) -> MemoryUnit:  # fmt: skip
        """One fact, marked with the day it was `learned` (default today; memclaw.service.learned)."""
        return self._writer.add_fact(text, scope=scope, section=section, learned=learned)

    def remember_fact(self, text: str, *, scope: str = OWNER_SCOPE, section: str | None = None,
                      learned: date | None = None) -> tuple[MemoryUnit, bool]:  # fmt: skip
        """`add_fact`, and whether it wrote the fact now (False: already remembered; memclaw.service._writes)."""
        return self._writer.remember_fact(text, scope=scope, section=section, learned=learned)

    def find_fact(self, text: str, *, scope: str = OWNER_SCOPE, section: str | None = None,
                  learned: date | None = None) -> MemoryUnit | None:  # fmt: skip
        """The fact `add_fact(text, section=section, learned=learned)` would write again (memclaw.service._writes)."""
        return self._writer.find_fact(text, scope=scope, section=section, learned=learned)

    def append_history(self, scope: str, text: str, ts: datetime) -> MemoryUnit:
        return self._writer.append_history(scope, text, ts)

    def record_consolidation(self, scope: str, record: ConsolidationRecord, *, steps: Sequence[str] = STEPS,
                             sync: bool = True) -> RecordResult:  # fmt: skip
        """Archive chunk, facts, history entry: memclaw.service.consolidation_record (`sync=False`: no index sync)."""
        return self._recorder.record(scope, record, steps=steps, sync=sync)

    def list_units(self, scope: str = OWNER_SCOPE, kind: str | None = None) -> list[MemoryUnit]:
        """Every memory of a scope as the Markdown holds it now, in file order (facts, then history); reads only."""
        return self._writer.list_units(scope, kind)

    def forget(self, ids: Sequence[str], *, scope: str = OWNER_SCOPE) -> list[MemoryUnit]:
        """Remove these memories from the Markdown, then from the index (memclaw.service._writes)."""
        return self.forget_detailed(ids, scope=scope).gone

    def forget_detailed(self, ids: Sequence[str], *, scope: str = OWNER_SCOPE) -> Forgot:
        """`forget`, and the facts and history entries that still restate what it forgot (memclaw.service.
        forgotten): recall hides or masks them from now on, and the owner may forget them too."""
        said: dict[str, list[str]] = {}
        units: dict[str, MemoryUnit] = {}

        def mentions(gone: Sequence[MemoryUnit], current: Sequence[MemoryUnit]) -> dict[str, list[str]]:
            units.update((u.id, u) for u in current)
            said.update(self._forgotten.mentions(scope, gone, current))
            return said

        gone = self._writer.forget(ids, scope=scope, mentions=mentions)
        gone_ids = {u.id for u in gone}
        also = {g: [units[i] for i in m if i in units and i not in gone_ids] for g, m in said.items()}
        return Forgot(gone, {g: m for g, m in also.items() if m})

    def restating(self, units: Sequence[MemoryUnit], *, scope: str = OWNER_SCOPE) -> dict[str, str]:
        """Which of `units` recall leaves out ("hidden") or masks in part ("masked") because they restate a
        forgotten memory, by id (memclaw.service.forgotten)."""
        return self._forgotten.marks(scope, units)

    # ----- stats -----------------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        return index_stats(self.scopes, self.config, self.index_mismatch)

    def close(self) -> None:
        self._join_prefetch()
        self.scopes.clear()


# ----- the store opened in the background ---------------------------------------------------------------
class Prefetch:
    """One background run of `work`; `join` waits for it and returns its error, if any."""

    def __init__(self, work: Callable[[], object], name: str) -> None:
        self._work = work
        self._error: BaseException | None = None
        self._thread = background_thread(self._run, name)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self._work()
        # re-raised in the caller's thread by whoever joins
        except BaseException as e:
            self._error = e

    def inside(self) -> bool:
        """The caller runs in the prefetch's own thread (which must not wait for itself)."""
        return self._thread is threading.current_thread()

    def join(self) -> BaseException | None:
        self._thread.join()
        err, self._error = self._error, None
        return err


# ----- `memclaw memory stats` ----------------------------------------------------------------------------
def index_stats(scopes: ScopeCache, config: Config, index_mismatch: Callable[[], str | None]) -> dict[str, Any]:
    """The stats of the index in `scopes`; `index_mismatch()` says why it must be rebuilt, if it must."""
    layout = scopes.layout
    per_scope = {}
    for scope in scopes.known_scopes_on_disk():
        units = scopes.parse(scope)
        sc = scopes.get(scope)
        counts: dict[str, int] = defaultdict(int)
        for u in units:
            counts[u.kind] += 1
        per_scope[scope] = {
            "facts": counts["fact"],
            "history": counts["history"],
            # archived turns
            "archive": counts["archive"],
            "indexed": len(sc.state.units) if sc else 0,
            "fresh": bool(sc and sc.state.signatures == scopes.signatures(scope) and not sc.state.pending),
            "vectors_pending": len(sc.state.pending) if sc else 0,
        }
    manifest = ix.read_manifest(layout) or {}
    rebuild = index_mismatch()
    if rebuild is not None:
        for s in per_scope.values():
            s["fresh"] = False
    url = config.memory.chroma_url
    return {
        "workspace": str(scopes.workspace.root),
        "index_dir": str(layout.root),
        "store": redact_url(url) if url else str(layout.chroma_dir),
        # an older manifest's
        "index_store": redact_url(manifest["store"]) if manifest.get("store") else None,
        # URL may hold credentials
        "rebuild": redact_url(rebuild) if rebuild else None,
        "model": config.embeddings.model,
        "embedder_fingerprint": manifest.get("embedder"),
        "tokenizer_fingerprint": manifest.get("tokenizer"),
        "scopes": per_scope,
    }
