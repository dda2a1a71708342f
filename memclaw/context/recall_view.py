"""What a recall view shows, in one place, rendered per medium.

One `RecallRow` per hit holds its rank, fused score, each signal's rank and score, kind, date, source, shortened
text and id. An archived turn shows as its excerpt, the matched turn marked. `recall_text` renders the rows for
chat and Discord; memclaw.cli.tables.recall_table renders them for a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memclaw.recall.results import RecallHit, RecallResult
from memclaw.util.text import ECHO_CHARS, MEMORY_CHARS, counted, shorten

NEIGHBOUR_CHARS = 100
"""The turns around an archived turn that matched, in a recall view."""


@dataclass(frozen=True)
class RecallRow:
    """One hit as every recall view shows it."""

    n: int
    score: float
    bm25_rank: int | None
    bm25_score: float | None
    # Signed: "+date", "-agent"; "+context": BM25 matched the turns beside it
    boosts: tuple[str, ...]
    vector_rank: int | None
    vector_score: float | None
    # The unit's kind; "excerpt" for an archived turn shown with its neighbours
    kind: str
    timestamp: datetime | None
    # "memory/MEMORY.md:3"
    source: str
    # Shortened to MEMORY_CHARS
    text: str
    id: str
    # The re-ranker's view (recall.rerank): "from #5, 0.912" or "#5, not re-ranked"; "" without a re-ranker
    rerank: str = ""

    @classmethod
    def of(cls, n: int, hit: RecallHit) -> RecallRow:
        u = hit.unit
        return cls(
            n=n,
            score=hit.score,
            bm25_rank=hit.bm25.rank,
            bm25_score=hit.bm25.score,
            boosts=tuple(("+" if v >= 0 else "-") + k for k, v in hit.boosts.items())
            + (("+context",) if hit.bm25.context else ()),
            vector_rank=hit.vector.rank,
            vector_score=hit.vector.score,
            kind="excerpt" if hit.excerpt else u.kind,
            timestamp=u.timestamp,
            source=f"{u.source}:{u.line}",
            text=excerpt_text(hit) if hit.excerpt else shorten(u.text, MEMORY_CHARS),
            id=u.id,
            rerank=rerank_cell(hit),
        )


def rerank_cell(hit: RecallHit) -> str:
    """A hit's place before re-ranking and the re-ranker's score: "from #5, 0.912"; "" without a re-ranker."""
    r = hit.rerank
    if r is None:
        return ""
    if r.rank is None:
        return f"#{r.fused_rank}, not re-ranked"
    return f"from #{r.fused_rank}" + (f", {r.score:.4g}" if r.score is not None else "")


def rerank_line(result: RecallResult) -> str | None:
    """What the re-ranker of a recall did, in one line (its tokens for the chat kind), or None without one."""
    r = result.rerank
    if r is None:
        return None
    if not r.ok:
        return f"re-ranker {r.by} failed, the fused order kept: {r.error}"
    cost = f", {r.prompt_tokens:,} + {r.completion_tokens:,} tokens" if r.prompt_tokens is not None else ""
    ignored = r.unknown_ids + r.repeated_ids
    extra = f", {counted(ignored, 'id')} in its answer ignored" if ignored else ""
    return f"re-ranker {r.by}: ordered the first {counted(r.reranked, 'hit')} in {r.ms / 1000:.2f} s{cost}{extra}"


def excerpt_text(hit: RecallHit) -> str:
    """An archived turn's excerpt on one line: its turns in order, separated by ` / `, the matched one in
    `»...«` and shortened to MEMORY_CHARS, the others to NEIGHBOUR_CHARS."""
    parts = []
    for t in hit.excerpt:
        if t.id == hit.unit.id:
            parts.append(f"»{shorten(t.text, MEMORY_CHARS)}«")
        else:
            parts.append(shorten(t.text, NEIGHBOUR_CHARS))
    return " / ".join(parts)


def recall_rows(result: RecallResult) -> list[RecallRow]:
    return [RecallRow.of(n, h) for n, h in enumerate(result.hits, 1)]


def recall_title(result: RecallResult) -> str:
    """The recall table's title: "recall 'query' · scope owner · hybrid" (the query shortened to one line)."""
    return f"recall {shorten(result.query, ECHO_CHARS)!r} · scope {result.scope} · {result.mode}"


def recall_text(result: RecallResult, *, markdown: bool = False, limit: int | None = None) -> str:
    """The recall view as compact text for a chat: the title, the warnings, one line per hit with its id.

    With `markdown`, numbers, scores and ids go in code spans, for Discord. With `limit`, the text has at most this
    many characters; the last lines are left out, and the text says so."""

    def code(s: str) -> str:
        return f"`{s}`" if markdown else s

    # As written (a repr would escape what the person typed)
    query = shorten(result.query, ECHO_CHARS)
    quoted = code(query) if markdown else f'"{query}"'
    lines = [f"recall {quoted} · scope {result.scope} · {result.mode} · {counted(len(result.hits), 'hit')}"]
    lines += [f"⚠ {w}" for w in result.warnings]
    said = rerank_line(result)
    error = result.rerank.error if result.rerank is not None else None
    if said is not None and not (error and any(error in w for w in result.warnings)):
        lines.append(said)
    if not result.hits:
        lines.append("(nothing found)")
    for r in recall_rows(result):
        b = f"bm25 #{r.bm25_rank}" if r.bm25_rank else "bm25 -"
        v = f"vec #{r.vector_rank}" if r.vector_rank else "vec -"
        date = f" {r.timestamp:%Y-%m-%d %H:%M}" if r.timestamp and r.kind == "excerpt" else ""
        date = date or (f" {r.timestamp:%Y-%m-%d}" if r.timestamp else "")
        head = f"{code(f'{r.n:>2}')} {code(f'{r.score:.3f}')} {b}, {v}" + (f", rerank {r.rerank}" if r.rerank else "")
        lines.append(f"{head} · {r.kind}{date} {r.source} · {r.text} · {code(r.id)}")
    if limit is None:
        return "\n".join(lines)
    out = ""
    for line in lines:
        if len(out) + len(line) + 1 > limit - 20:
            out += "\n…"
            break
        out = f"{out}\n{line}" if out else line
    return out
