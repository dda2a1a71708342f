"""The recall pipeline: a query -> explained hits over one scope's synced state (BM25 and vector candidates, their
floors and fusion, the date, session-link and recency boosts, one hit per text)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from memclaw.errors import (
    DerivedIndexError,
    EmbeddingUnavailable,
    NothingToRecall,
    UsageError,
    VectorStoreCorrupted,
    VectorStoreUnavailable,
)
from memclaw.index.bm25_context import with_context
from memclaw.index.identity import what_broke
from memclaw.index.passages import is_head, is_long, unit_of
from memclaw.markdown.units import KINDS, MemoryUnit
from memclaw.recall.archive import ExcerptBuilder, agent_turns, asks_what_agent_said, best_passages
from memclaw.recall.dates import find_date_ranges, without_dates
from memclaw.recall.fusion import Fused, FusionParams
from memclaw.recall.ranking import RankInput, RankSettings, rank
from memclaw.recall.rerank import Candidate, RerankStage, failure_line, needs_litellm
from memclaw.recall.results import RecallHit, RecallResult, Reranked, Signal

if TYPE_CHECKING:
    from memclaw.config import Config, RecallConfig
    from memclaw.embedding.base import Embedder
    from memclaw.index.identity import IndexIdentity
    from memclaw.index.scopes import Scope, ScopeCache
    from memclaw.index.tokenizer import Tokenizer
    from memclaw.store.base import VectorStore

log = logging.getLogger(__name__)
_Hit = TypeVar("_Hit")


def rank_settings(rc: RecallConfig) -> RankSettings:
    """The ranking settings of a recall configuration: its keys and its preset's tuning."""
    t = rc.tuning
    fusion = FusionParams(
        method=t.fusion,
        rrf_k=t.rrf_k,
        bm25_weight=t.bm25_weight,
        vector_weight=t.vector_weight,
        min_similarity=rc.min_similarity,
        min_bm25=t.min_bm25,
        bm25_confidence=t.bm25_confidence,
        vector_confidence=t.vector_confidence,
    )
    return RankSettings(
        fusion=fusion,
        date_weight=t.date_weight,
        date_scale="full" if t.fusion == "adaptive" else "best",
        date_after=t.date_after,
        link_weight=t.link_weight if t.link_sessions else 0.0,
        recency_half_life_days=rc.recency_half_life_days,
        keep_factor=t.keep_factor,
        agent_weight=t.agent_turn_weight,
        keep_agent_turns=t.keep_agent_turns,
        archive_min_similarity=rc.archive_min_similarity,
    )


StoreDown = VectorStoreUnavailable | EmbeddingUnavailable


class Recall:
    """Recall over the scopes of one index.

    Before a search, `prefetch(scope)` opens the vector store in the background; the next `store()` waits for it.
    Then `ensure_fresh(scope)` syncs the scope if its Markdown changed, and returns False when a sync runs elsewhere.
    And `rebuild(scope)` rebuilds the index from the Markdown when Chroma's files turn out damaged. With a re-ranker
    configured, `screen(result)` takes out of the candidates what must not be shown before the re-ranker reads them."""

    def __init__(
        self,
        config: Config,
        tokenizer: Tokenizer,
        scopes: ScopeCache,
        identity: IndexIdentity,
        *,
        embedder: Callable[[], Embedder],
        store: Callable[[], VectorStore],
        prefetch: Callable[[str], None],
        ensure_fresh: Callable[..., bool],
        rebuild: Callable[[str], object],
        screen: Callable[[RecallResult], RecallResult] | None = None,
    ) -> None:
        self.config = config
        self.tokenizer = tokenizer
        self.scopes = scopes
        self.identity = identity
        self._embedder = embedder
        self._store = store
        self._prefetch = prefetch
        self._ensure_fresh = ensure_fresh
        self._rebuild = rebuild
        # what the owner forgot, left out of the hits before a re-ranker reads them (memclaw.service.forgotten)
        self._screen = screen
        # the configured re-ranker (recall.rerank), made at its first use
        self._rerank: RerankStage | None = None
        if needs_litellm(config):
            from memclaw.llm.client import import_in_background

            # litellm's import (seconds) runs while the scope syncs and the query is searched
            import_in_background()

    def recall(
        self,
        query: str,
        *,
        scope: str,
        k: int | None,
        mode: str | None,
        kind: str | None,
        now: datetime | None,
        as_of: datetime | None = None,
        exclude: Collection[str] = (),
        rerank: bool = True,
    ) -> RecallResult:
        """`as_of` and `exclude` narrow the candidates before fusion: units dated after `as_of`, and the unit ids
        in `exclude`, are never candidates (the store as it stood then; a benchmark's masked units). `rerank`:
        False leaves the configured re-ranker out (recall.rerank; consolidation's many fact recalls)."""
        rc = self.config.recall
        tune = rc.tuning
        k = k or rc.k
        mode = mode or rc.mode
        if mode not in ("hybrid", "bm25", "vector"):
            raise UsageError(f"unknown recall mode {mode!r}: use hybrid, bm25 or vector")
        if kind not in (None, *KINDS):
            raise UsageError(f"unknown memory kind {kind!r}: use fact, history or archive")
        cut = len(query) > rc.max_query_chars
        if cut:
            query = query[: rc.max_query_chars]
        if not query or not query.strip() or not self.tokenizer.tokenize(query):
            # a vector of "the and of" would only bring back an arbitrary memory
            raise NothingToRecall()
        result = RecallResult(query, scope, mode, [])
        if cut:
            result.warnings.append(
                f"the query was cut to its first {rc.max_query_chars:,} characters (recall.max_query_chars)"
            )
        # e.g. an unknown sender: nothing to recall, and a read writes nothing
        if self.scopes.never_written(scope):
            return result
        t0 = time.perf_counter()
        # the vectors' side is down: said once, and not asked twice (a frozen server costs a timeout each time)
        store_down = self._freshen(scope, mode, result)
        sc = self.scopes.get(scope)
        result.timings_ms["sync_check"] = (time.perf_counter() - t0) * 1000
        if store_down is not None and (mode == "bm25" or sc is None or not sc.state.units):
            result.warnings.append(f"{store_down}; recalling from the last synced state")
        if sc is None or not sc.state.units:
            return result
        n_cand = max(tune.candidates, k * 3)
        admit = _admission(sc.state.units, as_of, exclude)
        bm25_hits: list[tuple[str, float]] = []
        bm25_bound = 0.0
        # turns whose BM25 score is their context's
        by_context: set[str] = set()
        vec_hits: list[tuple[str, float]] = []
        # a unit -> its best passage (memclaw.recall.archive: excerpts of long turns)
        passages: dict[str, str] = {}
        # a date without a year: the occurrence memory holds something in, when the tense does not say
        holds = (lambda r: bool(sc.dated_in([r], 1))) if sc is not None else None
        ranges = find_date_ranges(query, now or datetime.now(), holds=holds) if tune.date_weight > 0 else []
        if mode in ("hybrid", "bm25"):
            t = time.perf_counter()
            # the words of a date are no topic
            tokens = self.tokenizer.tokenize(without_dates(query, ranges))
            with self.scopes.lock:
                bm25_hits = _admitted(lambda n: sc.lexical.search(tokens, n), n_cand, admit) if tokens else []
                bm25_bound = sc.lexical.max_score(tokens) if tokens else 0.0
                use = tokens and tune.bm25_context_weight > 0
                contexts = sc.turn_contexts(self.config.agent.name) if use else None
                if contexts is not None:
                    found = _admitted(lambda n: contexts.search(sc.lexical, tokens, n), n_cand, admit)  # type: ignore[arg-type]
                    bm25_hits, by_context = with_context(bm25_hits, found, tune.bm25_context_weight, n_cand)
            result.timings_ms["bm25"] = (time.perf_counter() - t) * 1000
        if mode in ("hybrid", "vector"):
            from memclaw.embedding.load import encode_query

            # the index's vectors are another model's
            down = store_down or self.identity.deferred
            t = time.perf_counter()
            qv = None
            if down is None:
                try:
                    qv = encode_query(self._embedder(), query)
                except EmbeddingUnavailable as e:
                    # the provider is down: as for a Chroma outage
                    down = e
            result.timings_ms["embed"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            if down is None:
                try:
                    store = self._store()
                    raw = _admitted(lambda n: store.query(scope, qv, n), n_cand * 2, admit, lambda h: unit_of(h.id))
                    vec_hits, passages = self._unit_similarities(sc, raw), best_passages(raw)
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
        bm25_hits = [(i, s) for i, s in bm25_hits if i in units and (admit is None or admit(i))]
        # Ignore vectors orphaned by a crash, and, after a repair, units the filter leaves out
        vec_hits = [(i, s) for i, s in vec_hits if i in units and (admit is None or admit(i))]
        result.date_ranges = ranges
        links = sc.state.links if tune.link_sessions else {}
        entries_of = sc.entries_by_cid() if tune.link_sessions else {}
        said_by_agent = agent_turns(units, self.config.agent.name)
        dated_in = sc.dated_in
        if admit is not None:
            dated_in = lambda rs, n: _admitted(lambda m: sc.dated_in(rs, m), n, admit, str)  # noqa: E731
        inp = RankInput(
            bm25=bm25_hits,
            vector=vec_hits,
            units=units,
            links=links,
            ranges=ranges,
            dated_in=dated_in,
            now=now,
            bm25_bound=bm25_bound,
            entries_of=entries_of,
            agent_turns=said_by_agent,
        )
        turns = ExcerptBuilder(units, entries_of, self.tokenizer.tokenize, (tune.excerpt_before, tune.excerpt_after),
                            tune.excerpt_wide, query, passages, said_by_agent=said_by_agent,
                            agent_words=tune.excerpt_agent_words)  # fmt: skip

        def hit_of(f: Fused) -> RecallHit:
            u = units[f.id]
            return RecallHit(
                unit=u,
                score=f.score,
                bm25=Signal(f.bm25_rank, f.bm25_score, f.id in by_context),
                vector=Signal(f.vector_rank, f.vector_similarity),
                boosts=dict(f.boosts),
                covered_by=tuple(links.get(f.id, ())) + turns.covered_by(u),
                excerpt=turns.excerpt(u),
            )

        settings = rank_settings(rc)
        # a question about what the agent said: its own turns are the evidence (decision 0046)
        asked_weight = max(tune.agent_asked_weight, tune.agent_turn_weight)
        if asked_weight != tune.agent_turn_weight and asks_what_agent_said(query):
            result.agent_asked = asked_weight
            settings = replace(settings, agent_weight=asked_weight)
        stage = self._rerank_stage() if rerank else None
        if stage is None:
            result.hits = [hit_of(f) for f in rank(inp, settings, k=k, n_cand=n_cand, kind=kind)]
        else:
            fused = [hit_of(f) for f in rank(inp, settings, k=max(k, stage.top_n), n_cand=n_cand, kind=kind)]
            if not self._reranked(stage, query, fused, k, result):
                # exactly the hits of a recall without a re-ranker
                kept = rank(inp, settings, k=k, n_cand=n_cand, kind=kind)
                result.hits = [replace(hit_of(f), rerank=Reranked(n, None)) for n, f in enumerate(kept, 1)]
        result.timings_ms["total"] = (time.perf_counter() - t0) * 1000
        return result

    def _rerank_stage(self) -> RerankStage | None:
        """The configured re-ranker's stage (made once per Recall, so a failure is remembered), or None when off."""
        if self.config.recall.rerank.kind == "off":
            return None
        if self._rerank is None:
            self._rerank = RerankStage(self.config)
        return self._rerank

    def _reranked(self, stage: RerankStage, query: str, fused: list[RecallHit], k: int, result: RecallResult) -> bool:
        """Set `result.hits` to the first `top_n` fused hits in the re-ranker's order, then the rest in fused order,
        cut to k, and return True; False when the re-ranker failed (the report and warning say why). The re-ranker
        reads the hits as `screen` leaves them: nothing the owner forgot."""
        rc = self.config.recall.rerank
        place = {h.unit.id: n for n, h in enumerate(fused, 1)}
        if self._screen is not None:
            fused = self._screen(RecallResult(result.query, result.scope, result.mode, fused)).hits
        head = fused[: stage.top_n]
        t = time.perf_counter()
        candidates = [Candidate(h.unit.id, _candidate_text(h, rc.max_chars), _candidate_date(h.unit)) for h in head]
        order, report = stage.order(query, candidates) if candidates else ([], None)
        result.timings_ms["rerank"] = (time.perf_counter() - t) * 1000
        result.rerank = report
        if report is None or not report.ok:
            if report is not None and report.error is not None and not report.skipped:
                result.warnings.append(failure_line(report.error))
            return False
        out = [
            replace(head[i], rerank=Reranked(place[head[i].unit.id], n if score is not None else None, score))
            for n, (i, score) in enumerate(order, 1)
        ]
        out += [replace(h, rerank=Reranked(place[h.unit.id], None)) for h in fused[stage.top_n :]]
        result.hits = out[:k]
        return True

    def _freshen(self, scope: str, mode: str, result: RecallResult) -> StoreDown | None:
        """Before recall: the store opened in the background, the scope synced if its Markdown changed (auto_sync).
        Returns the vectors' side that is down, if it is."""
        if mode != "bm25":
            # a no-op once the store is open
            self._prefetch(scope)
        if self.config.memory.auto_sync:
            try:
                if not self._ensure_fresh(scope, vectors=mode != "bm25"):
                    result.warnings.append("a sync is running; recalled from the previous index state")
            except (VectorStoreUnavailable, EmbeddingUnavailable) as e:
                return e
        return None

    def _unit_similarities(self, sc: Scope, hits) -> list[tuple[str, float]]:
        units = sc.state.units
        return _best_per_unit(
            hits, self.config.recall.tuning.vector_signal, lambda uid: uid in units and is_long(units[uid].text)
        )

    def _query_after_repair(
        self, scope: str, qv: np.ndarray, n: int, err: VectorStoreCorrupted, result: RecallResult, mode: str
    ) -> list[tuple[str, float]]:
        """Recall met damaged Chroma files: rebuild the index from the Markdown (if auto_sync) and query again;
        otherwise, or if that fails too, answer from BM25 alone."""
        if self.config.memory.auto_sync:
            msg = f"{what_broke(err)}; rebuilt the index from the Markdown"
            log.warning(msg)
            result.warnings.append(msg)
            try:
                self._rebuild(scope)
                sc = self.scopes.get(scope)
                return self._unit_similarities(sc, self._store().query(scope, qv, n)) if sc else []
            except (DerivedIndexError, VectorStoreUnavailable) as e:
                err = e  # type: ignore[assignment]
        if mode == "vector":
            raise err
        result.warnings.append(f"{err}; recall fell back to BM25 only")
        log.warning("%s; recall fell back to BM25 only", err)
        return []


def _candidate_text(h: RecallHit, max_chars: int) -> str:
    """What a re-ranker reads of a hit: its text, or an archived turn's excerpt (`speaker: text` joined by ` / `),
    cut to `max_chars`."""
    turns = h.excerpt
    text = " / ".join(f"{t.extra.get('speaker') or '?'}: {t.text.strip()}" for t in turns) if turns else h.unit.text
    return text if len(text) <= max_chars else text[:max_chars]


def _candidate_date(u: MemoryUnit) -> str | None:
    return u.timestamp.strftime("%Y-%m-%d") if u.timestamp else None


def _admission(units, as_of: datetime | None, exclude: Collection[str]) -> Callable[[str], bool] | None:
    """Which unit ids may be candidates (None: all): not in `exclude`, and not dated after `as_of`."""
    if as_of is None and not exclude:
        return None
    out = exclude if isinstance(exclude, (set, frozenset, dict)) else frozenset(exclude)

    def admit(uid: str) -> bool:
        if uid in out:
            return False
        u = units.get(uid)
        return as_of is None or u is None or u.timestamp is None or u.timestamp <= as_of

    return admit


def _admitted(
    fetch: Callable[[int], Sequence[_Hit]],
    n: int,
    admit: Callable[[str], bool] | None,
    key: Callable[[_Hit], str] = lambda h: h[0],  # type: ignore[index]
) -> list[_Hit]:
    """The first `n` hits of `fetch` whose unit `admit` lets through: fetched four times wider each round until
    there are `n` or the source runs out, so a filter leaves the candidate count as it would be without it."""
    if admit is None:
        return list(fetch(n))
    m = n * 2
    while True:
        got = list(fetch(m))
        kept = [h for h in got if admit(key(h))]
        if len(kept) >= n or len(got) < m:
            return kept[:n]
        m *= 4


def _best_per_unit(hits, signal: str = "max", is_long: Callable[[str], bool] | None = None) -> list[tuple[str, float]]:
    """Vector hits, best first, as unit hits (memclaw.index.passages), by `signal`.

    `max`: a unit's best vector. `passages`: its best passage, heads ignored.
    `head`: a long unit's head vector or a short unit's only vector; `is_long(unit_id)` tells them apart."""
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
