"""`RankBM25Index`, the reference `InvertedBM25` is compared with: the `LexicalIndex` interface on rank-bm25.

It is `BM25Okapi` with the Lucene idf, rebuilt on the first search after a change, scoring every document in Python.
Tests and `benchmarks/bench_bm25.py` use it; it is too slow for a large scope (benchmarks/results/bm25.md).
rank-bm25's own idf is zero or negative for a term in half the documents or more, hence the Lucene idf.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from memclaw.errors import UsageError
from memclaw.index._bm25 import (
    DEFAULT_B,
    DEFAULT_K1,
    FORMAT_VERSION,
    check_params,
    corrupt,
    decode_index,
    encode_index,
    lucene_idf,
    read_index_file,
    top_k,
)
from memclaw.util.files import replace_atomically


def _lucene_okapi(corpus: list[list[str]], k1: float, b: float) -> Any:
    from rank_bm25 import BM25Okapi

    class LuceneBM25Okapi(BM25Okapi):
        """BM25Okapi with Lucene's always-positive idf instead of the epsilon-floored ATIRE idf."""

        def _calc_idf(self, nd: dict[str, int]) -> None:
            for word, freq in nd.items():
                self.idf[word] = lucene_idf(self.corpus_size, freq)
            self.average_idf = sum(self.idf.values()) / len(self.idf) if self.idf else 0.0

    return LuceneBM25Okapi(corpus, k1=k1, b=b)


class RankBM25Index:
    """The LexicalIndex interface on rank-bm25: rebuilt on the first search after a change, O(N) per query."""

    kind: ClassVar[str] = "rank_bm25"

    def __init__(self, k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise UsageError(f"invalid BM25 parameters k1={k1}, b={b}: use k1 >= 0 and 0 <= b <= 1")
        self.k1 = float(k1)
        self.b = float(b)
        self._docs: dict[str, list[str]] = {}
        self._bm25: Any = None
        self._order: list[str] = []

    @property
    def fingerprint(self) -> str:
        return f"{self.kind}-f{FORMAT_VERSION}-k1={self.k1:g}-b={self.b:g}"

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._docs

    def ids(self) -> set[str]:
        return set(self._docs)

    def add(self, doc_id: str, tokens: Sequence[str]) -> None:
        self._docs.pop(doc_id, None)
        self._docs[doc_id] = list(tokens)
        self._bm25 = None

    def remove(self, doc_id: str) -> bool:
        if self._docs.pop(doc_id, None) is None:
            return False
        self._bm25 = None
        return True

    def _model(self) -> Any:
        if self._bm25 is None:
            self._order = list(self._docs)
            self._bm25 = _lucene_okapi([self._docs[i] for i in self._order], self.k1, self.b)
        return self._bm25

    def doc_freq(self, term: str) -> int:
        return sum(term in tokens for tokens in self._docs.values())

    def max_score(self, query_tokens: Sequence[str]) -> float:
        if not self._docs or not any(self._docs.values()):
            return 0.0
        idf = self._model().idf
        return sum(idf.get(t, 0.0) * (self.k1 + 1) for t in query_tokens)

    def search(self, query_tokens: Sequence[str], k: int) -> list[tuple[str, float]]:
        if k <= 0 or not query_tokens or not any(self._docs.values()):
            return []
        model = self._model()
        with np.errstate(invalid="ignore", divide="ignore"):  # empty documents with b=1: 0/0, never a hit
            scores = np.asarray(model.get_scores(list(query_tokens)), np.float64)
        return top_k(self._order, np.nan_to_num(scores, nan=0.0), k)

    def to_bytes(self) -> bytes:
        meta = {
            "kind": self.kind,
            "format": FORMAT_VERSION,
            "k1": self.k1,
            "b": self.b,
            "docs": [[i, t] for i, t in self._docs.items()],
        }
        return encode_index(meta)

    def save(self, path: Path) -> None:
        replace_atomically(path, self.to_bytes())

    @classmethod
    def load(cls, path: Path) -> RankBM25Index:
        return cls.from_bytes(read_index_file(path), path)

    @classmethod
    def from_bytes(cls, raw: bytes, where: str | Path) -> RankBM25Index:
        meta, rest = decode_index(raw, where)
        k1, b = check_params(where, meta, cls.kind)
        docs = meta.get("docs")
        if len(rest) or not isinstance(docs, list):
            raise corrupt(where, "bad body")
        self = cls(k1, b)
        for d in docs:
            if (
                not isinstance(d, list)
                or len(d) != 2
                or not isinstance(d[0], str)
                or not isinstance(d[1], list)
                or not all(isinstance(t, str) for t in d[1])
            ):
                raise corrupt(where, "bad document")
            self._docs[d[0]] = d[1]
        return self
