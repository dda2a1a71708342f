"""An exact (brute-force) vector store for the fusion lab: cosine over every stored vector, ties by id, so a replay
is reproducible to the last digit (Chroma's HNSW is approximate and its graph differs from build to build)."""

from __future__ import annotations

import numpy as np

from memclaw.store.base import VectorHit


class ExactStore:
    """memclaw's VectorStore protocol over numpy arrays held in memory (one matrix per scope)."""

    def __init__(self) -> None:
        self._vecs: dict[str, dict[str, np.ndarray]] = {}
        self._mat: dict[str, tuple[list[str], np.ndarray]] = {}

    def upsert(self, scope, ids, embeddings, metadatas, documents=None) -> None:
        s = self._vecs.setdefault(scope, {})
        for i, e in zip(ids, embeddings, strict=True):
            v = np.asarray(e, dtype=np.float32)
            s[i] = v / (np.linalg.norm(v) or 1.0)
        self._mat.pop(scope, None)

    def matrix(self, scope: str) -> tuple[list[str], np.ndarray]:
        if scope not in self._mat:
            s = self._vecs.get(scope, {})
            ids = sorted(s)
            m = np.stack([s[i] for i in ids]) if ids else np.zeros((0, 1), np.float32)
            self._mat[scope] = (ids, m)
        return self._mat[scope]

    def similarities(self, scope: str, embedding) -> tuple[list[str], np.ndarray]:
        """Every stored vector's cosine with the query, in id order."""
        ids, m = self.matrix(scope)
        q = np.asarray(embedding, dtype=np.float32)
        return ids, (m @ (q / (np.linalg.norm(q) or 1.0))) if ids else np.zeros(0, np.float32)

    def query(self, scope, embedding, k) -> list[VectorHit]:
        ids, sims = self.similarities(scope, embedding)
        order = sorted(range(len(ids)), key=lambda j: (-float(sims[j]), ids[j]))[:k]
        return [VectorHit(ids[j], float(sims[j])) for j in order]

    def texts(self, scope):
        return {i: "" for i in self._vecs.get(scope, {})}

    def delete(self, scope, ids) -> None:
        for i in ids:
            self._vecs.get(scope, {}).pop(i, None)
        self._mat.pop(scope, None)

    def warm(self, scope) -> None:
        pass

    def ids(self, scope):
        return set(self._vecs.get(scope, {}))

    def count(self, scope) -> int:
        return len(self._vecs.get(scope, {}))

    def drop(self, scope) -> None:
        self._vecs.pop(scope, None)
        self._mat.pop(scope, None)

    def describe(self) -> str:
        return "exact (fusion lab)"
