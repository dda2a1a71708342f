"""The lexical side of recall: BM25 over one scope's memories, behind a small interface (memclaw.index.bm25_scoring);
this module makes a new index and loads a saved one of either kind.

Scoring (both implementations, identical to 1e-9):

    score(d, q) = sum over query tokens t (repeats count) of
                  idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))
    idf(t)      = ln(1 + (N - df + 0.5) / (df + 0.5))          (Lucene; > 0 for every df <= N)

rank-bm25's `BM25Okapi` idf, ln((N - df + 0.5) / (df + 0.5)), is zero or negative for a term in half the
documents or more, so with one or two memories every match would score nothing; the Lucene idf ranks
sensibly from the first memory. N, df and avgdl count live documents only (removals are exact).

- `InvertedBM25` (the default, memclaw.index.bm25_inverted): an inverted index of numpy postings (term -> doc
  slots, term frequencies). `add` is O(document length), `remove` is O(1) (a tombstone; the index compacts itself
  when more than a quarter of its slots are dead), a query touches only the postings of its own terms, vectorised.
- `RankBM25Index` (memclaw.index.bm25_rank): the same interface on rank-bm25 (`BM25Okapi` with the Lucene idf),
  rebuilt lazily on the first search after a change and scoring every document in a Python loop. The reference the
  tests compare `InvertedBM25` against; too slow for large scopes (see benchmarks/results/bm25.md).

Persistence (memclaw.index.bm25_format): `to_bytes()` is `MAGIC | sha256(body) | body`, the body a JSON header plus
raw little-endian arrays (no pickle: nothing read back can run code). The index state keeps it in its SQLite file
(memclaw.index.scope_state), with the documents added and removed since as a log; `save`/`load` write and read it as
a file of its own (atomically: tmp + rename). Missing, truncated, corrupted or foreign bytes raise `IndexError_`; the
caller rebuilds the index from the Markdown.

Not thread-safe for writers: serialise `add`/`remove`/`save` against `search` (MemoryService holds a lock).
"""

from __future__ import annotations

from pathlib import Path

from memclaw.errors import UsageError
from memclaw.index.bm25_format import corrupt, decode_index, read_index_file
from memclaw.index.bm25_inverted import InvertedBM25
from memclaw.index.bm25_rank import RankBM25Index
from memclaw.index.bm25_scoring import DEFAULT_B, DEFAULT_K1, LexicalIndex

BACKENDS = ("inverted", "rank_bm25")


def load_lexical_index(path: Path) -> LexicalIndex:
    """Load whichever implementation wrote `path`."""
    raw = read_index_file(path)
    meta, _ = decode_index(raw, path)
    kind = meta.get("kind")
    if kind == InvertedBM25.kind:
        return InvertedBM25.from_bytes(raw, path)
    if kind == RankBM25Index.kind:
        return RankBM25Index.from_bytes(raw, path)
    raise corrupt(Path(path), f"unknown index kind {kind!r}")


def make_lexical_index(backend: str = "inverted", *, k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> LexicalIndex:
    """A new, empty lexical index: `inverted` (default, fast at any size) or `rank_bm25` (reference)."""
    name = backend.replace("-", "_").lower()
    if name == "inverted":
        return InvertedBM25(k1, b)
    if name in ("rank_bm25", "rankbm25"):
        return RankBM25Index(k1, b)
    raise UsageError(f"unknown BM25 backend {backend!r}: use one of {', '.join(BACKENDS)}")
