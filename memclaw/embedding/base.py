"""What every embedder is: the protocol (texts -> L2-normalized float32 rows) and its small helpers."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from memclaw.errors import EmbeddingError

Progress = Callable[[int], None]
"""Called with the number of texts just embedded."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalized float32 vectors."""

    name: str
    dim: int
    fingerprint: str
    """Identifies the weights and pooling/normalization (not the backend); the index rebuilds when it changes."""

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
        """float32 array (len(texts), dim), rows L2-normalized; `progress(n)` after each batch of n texts."""
        ...


def normalize_rows(v: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float32), so that a dot product is the cosine similarity."""
    v = np.asarray(v, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return (v / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def batches(n: int, batch_size: int) -> Iterator[tuple[int, int]]:
    if batch_size < 1:
        raise EmbeddingError(f"batch_size must be >= 1, got {batch_size}; fix embeddings.batch_size")
    for start in range(0, n, batch_size):
        yield start, min(n, start + batch_size)
