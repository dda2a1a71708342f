"""What a vector store is to memclaw: `VectorHit`, the `VectorStore` protocol the index needs, the one collection
name per workspace and scope, and Chroma's distances turned into cosine similarities."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

SPACE = "cosine"

Metadata = Mapping[str, Any]
"""What the store keeps beside a vector: memclaw's scope, kind, source and date of the unit it stands for."""


@dataclass(frozen=True)
class VectorHit:
    id: str
    # cosine similarity in [-1, 1]
    similarity: float


class VectorStore(Protocol):
    """What the index needs from a vector store. `scope` is a memclaw scope name."""

    def upsert(
        self,
        scope: str,
        ids: Sequence[str],
        embeddings: np.ndarray,
        metadatas: Sequence[Metadata],
        documents: Sequence[str] | None = None,
    ) -> None: ...
    def texts(self, scope: str) -> dict[str, str]: ...
    def delete(self, scope: str, ids: Sequence[str]) -> None: ...
    def query(self, scope: str, embedding: np.ndarray, k: int) -> list[VectorHit]: ...
    def warm(self, scope: str) -> None: ...
    def ids(self, scope: str) -> set[str]: ...
    def count(self, scope: str) -> int: ...
    def drop(self, scope: str) -> None: ...
    def describe(self) -> str: ...


def distance_to_similarity(distance: float, space: str) -> float:
    """Chroma returns distances, not similarities. For unit vectors: cosine and ip give 1 - d,
    squared L2 gives 1 - d/2."""
    if space in ("cosine", "ip"):
        return 1.0 - distance
    if space == "l2":
        return 1.0 - distance / 2.0
    raise ValueError(f"unknown Chroma space {space!r}")


def first_hits(
    ids: Sequence[Sequence[str]] | None, dists: Sequence[Sequence[float]] | None, space: str
) -> list[VectorHit]:
    """A Chroma query result's first (only) query, as hits with similarities."""
    first_ids = ids[0] if ids else []
    first_d = dists[0] if dists else []
    return [VectorHit(i, distance_to_similarity(float(d), space)) for i, d in zip(first_ids, first_d, strict=True)]


def collection_name(namespace: str, scope: str) -> str:
    """A valid Chroma collection name (3-512 chars of [a-zA-Z0-9._-]) unique per workspace and scope."""
    digest = hashlib.sha256(f"{namespace}\x00{scope}".encode()).hexdigest()[:20]
    return f"memclaw-{digest}"
