"""BM25 scoring shared by both lexical indexes: the parameters, Lucene's idf, the `LexicalIndex` interface and the
deterministic top-k (ties by id). The formula is in memclaw.index.bm25's docstring."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

DEFAULT_K1 = 1.2
DEFAULT_B = 0.75


def lucene_idf(n_docs: int, df: int) -> float:
    """Lucene's BM25 idf: positive for every 0 < df <= n_docs."""
    return math.log1p((n_docs - df + 0.5) / (df + 0.5))


@runtime_checkable
class LexicalIndex(Protocol):
    """A BM25 index of one scope. Tokens come from memclaw.index.tokenizer.Tokenizer (same for docs and queries)."""

    kind: ClassVar[str]
    k1: float
    b: float

    @property
    def fingerprint(self) -> str:
        """Implementation, on-disk format version and parameters; a change means a rebuild."""
        ...

    def add(self, doc_id: str, tokens: Sequence[str]) -> None:
        """Index a document; an existing `doc_id` is replaced. Empty token lists are kept (they match nothing)."""
        ...

    def remove(self, doc_id: str) -> bool:
        """Forget a document; False if it was not there."""
        ...

    def search(self, query_tokens: Sequence[str], k: int) -> list[tuple[str, float]]:
        """Up to k (doc_id, score), best first (ties by id), only score > 0."""
        ...

    def max_score(self, query_tokens: Sequence[str]) -> float:
        """Upper bound of `search` scores for this query (every term matched with saturated tf)."""
        ...

    def doc_freq(self, term: str) -> int:
        """How many documents hold `term`."""
        ...

    def __len__(self) -> int: ...

    def __contains__(self, doc_id: object) -> bool: ...

    def ids(self) -> set[str]: ...

    def to_bytes(self) -> bytes: ...

    def save(self, path: Path) -> None: ...

    @classmethod
    def load(cls, path: Path) -> LexicalIndex: ...


def top_k(ids: Sequence[str | None], scores: np.ndarray, k: int) -> list[tuple[str, float]]:
    """Best k of the positive scores, ties broken by id (deterministic across implementations)."""
    cand = np.flatnonzero(scores > 0)
    if len(cand) > k:
        kth = -np.partition(-scores[cand], k - 1)[k - 1]
        cand = cand[scores[cand] >= kth]  # keep every tie at the boundary, then order by id
    hits = [(ids[i], float(scores[i])) for i in cand.tolist()]
    hits.sort(key=lambda h: (-h[1], h[0]))
    return hits[:k]  # type: ignore[return-value]
