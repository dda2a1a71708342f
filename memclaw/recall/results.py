"""Recall results: what the hybrid pipeline returns, with each signal's rank and score for explanation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from memclaw.markdown.units import MemoryUnit
from memclaw.recall.dates import DateRange


class RecallOptions(TypedDict, total=False):
    """The options of a recall (`MemoryService.recall` / `recall_detailed`): the scope to search (the owner's by
    default), how many hits (`recall.k`), the mode ("hybrid", "bm25", "vector") and a unit kind to keep."""

    scope: str
    k: int | None
    mode: str | None
    kind: str | None


@dataclass(frozen=True)
class Signal:
    """One retrieval signal's view of a hit."""

    # 1-based rank in that signal's candidate list; None if it did not retrieve the unit
    rank: int | None
    # BM25 score, or cosine similarity for the vector signal
    score: float | None
    # BM25: the score is the turn's with the turns beside it (memclaw.index.bm25_context)
    context: bool = False


@dataclass(frozen=True)
class Reranked:
    """The re-ranker's view of a hit (recall.rerank): its place in the fused order, and the re-ranker's."""

    # 1-based place in the fused order
    fused_rank: int
    # 1-based place the re-ranker gave it; None when it was not re-ranked (past top_n, or the re-ranker failed)
    rank: int | None
    # The re-ranker's score (provider, cross-encoder); None for the chat kind, which gives an order only
    score: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"fused_rank": self.fused_rank, "rank": self.rank, "score": _r(self.score)}


@dataclass
class RerankReport:
    """What the re-ranker of one recall did: which one, how many hits it ordered, its cost, or why it failed (the
    fused order then stands)."""

    # "provider:cohere/rerank-v3.5", "cross_encoder:/path", "chat:openai/gpt-4o-mini"
    by: str
    ok: bool
    # The failure, one line; None when ok
    error: str | None = None
    # Not asked: it failed less than COOLDOWN_S ago, and that failure was already said
    skipped: bool = False
    reranked: int = 0
    # The chat kind's tokens; None for the others
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    ms: float = 0.0
    # Ids the chat model named that were no candidate's, and ids it named twice (ignored)
    unknown_ids: int = 0
    repeated_ids: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"by": self.by, "ok": self.ok, "reranked": self.reranked, "ms": round(self.ms, 1)}
        if self.error is not None:
            out["error"] = self.error
        if self.skipped:
            out["skipped"] = True
        if self.prompt_tokens is not None:
            out["prompt_tokens"] = self.prompt_tokens
            out["completion_tokens"] = self.completion_tokens
        if self.unknown_ids or self.repeated_ids:
            out["ignored"] = {"unknown_ids": self.unknown_ids, "repeated_ids": self.repeated_ids}
        return out


@dataclass(frozen=True, kw_only=True)
class RecallHit:
    unit: MemoryUnit
    # fused score, higher is better
    score: float
    bm25: Signal
    vector: Signal
    boosts: dict[str, float] = field(default_factory=dict)
    covered_by: tuple[str, ...] = ()
    """Ids of the units that cover this one (a fact's or an archived turn's consolidation summary): the memory
    section skips it when one of them is already in."""
    excerpt: tuple[MemoryUnit, ...] = ()
    """An archived turn's window: the turns of its chunk around it, itself included (memclaw.recall.archive); the
    memory section serves it as an excerpt of the conversation."""
    rerank: Reranked | None = None
    """Set when a re-ranker is configured (recall.rerank): the fused place and the re-ranker's."""

    def to_json(self) -> dict[str, Any]:
        u = self.unit
        return (
            {
                "id": u.id,
                "text": u.text,
                "kind": u.kind,
                "scope": u.scope,
                "source": f"{u.source}:{u.line}",
                "date": u.timestamp.isoformat(timespec="minutes") if u.timestamp else None,
                "section": u.section,
                "score": round(self.score, 6),
                "bm25": {"rank": self.bm25.rank, "score": _r(self.bm25.score)}
                | ({"context": True} if self.bm25.context else {}),
                "vector": {"rank": self.vector.rank, "similarity": _r(self.vector.score)},
                "boosts": {k: round(v, 6) for k, v in self.boosts.items()},
                "covered_by": list(self.covered_by),
            }
            | ({"excerpt": [excerpt_turn_json(t) for t in self.excerpt]} if self.excerpt else {})
            | ({"rerank": self.rerank.to_json()} if self.rerank is not None else {})
        )


def excerpt_turn_json(u: MemoryUnit) -> dict[str, Any]:
    """One turn of an excerpt as `recall --json` shows it."""
    return {
        "id": u.id,
        "speaker": u.extra.get("speaker"),
        "date": u.timestamp.isoformat(timespec="minutes") if u.timestamp else None,
        "text": u.text,
    }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


@dataclass
class RecallResult:
    query: str
    scope: str
    mode: str
    hits: list[RecallHit]
    warnings: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    date_ranges: list[DateRange] = field(default_factory=list)
    """The date ranges the query named (they lifted the memories stamped inside them)."""
    agent_asked: float | None = None
    """When the query asks what the agent said: the share of their score its own turns kept (agent_asked_weight)."""
    scope_size: int = 0
    """How many memories the scope holds (of the kind asked): with fewer hits than k, the rest fell below the
    relevance floor."""
    rerank: RerankReport | None = None
    """What the configured re-ranker did (recall.rerank); None when none is configured."""


def rerank_json(result: RecallResult, hit: RecallHit) -> dict[str, Any]:
    """The re-ranker's part of a hit in `recall --json`: its places and score, with the call that ordered it (its
    tokens for the chat kind, or why it failed); {} without a re-ranker."""
    if hit.rerank is None or result.rerank is None:
        return {}
    return {"rerank": hit.rerank.to_json() | {"call": result.rerank.to_json()}}
