"""Embed a sync's passages and write them to the vector store chunk by chunk.

What was stored stays stored: an interrupted rebuild keeps every chunk written, and the next sync embeds the rest.
Interrupted or cut off by the provider inside a chunk, the batches embedded so far are written before it stops.

A passage with a context, a short archived turn, is stored as one normalised blend of two vectors.
They are its own vector and CONTEXT_WEIGHT times its context's (memclaw.index.passages.turn_context).
The passages are embedded longest first, in chunks of whole batches, so the vectors do not depend on the chunking.
A short turn's context is embedded with its batch.
The chunks are of equal size, at most CHUNK_PASSAGES.
A small last chunk would leave Chroma work for the next write: 20 s on the next `memory add` after a 10k rebuild.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from memclaw.embedding.base import Progress
from memclaw.errors import DerivedIndexError, EmbeddingUnavailable, MemclawError
from memclaw.markdown.formats import clean_text
from memclaw.util.batches import even_chunk
from memclaw.util.text import counted

CHUNK_PASSAGES = 4096
CONTEXT_WEIGHT = 0.5
"""How much of a short turn's stored vector its context makes: own + 0.5 context, made unit length (chosen on one
half of the LoCoMo dev conversations among 0.5 / 0.7 / 1.0 and held on the other,
docs/decisions/0007-a-turn-embedded-with-its-neighbours.md)."""


@dataclass(frozen=True)
class Passage:
    # the vector's id in the store (memclaw.index.passages)
    id: str
    text: str
    meta: dict[str, Any]
    # the id of the unit it belongs to
    unit: str
    # embedded too, the stored vector blends both (see the module docstring)
    context: str | None = None


def write_vectors(
    embedder: Any,
    store: Any,
    scope: str,
    passages: list[Passage],
    *,
    batch_size: int,
    progress: Progress | None,
    before_write: Callable[[], None],
    on_dimensions: Callable[[int], None],
) -> tuple[set[str], EmbeddingUnavailable | None]:
    """Embed and upsert `passages`. `on_dimensions(dim)` sees the first vectors before anything is written;
    `before_write()` runs before the first write. Returns the ids of the units not all of whose passages were
    stored, and why (the embedding provider went down), or (empty, None)."""
    order = sorted(range(len(passages)), key=lambda i: -len(clean_text(passages[i].text)))
    chunk = even_chunk(len(order), CHUNK_PASSAGES, batch_size)
    step = max(1, batch_size)
    # batches embedded, not yet written: (positions, vectors)
    held: list[tuple[list[int], np.ndarray]] = []
    stored = 0

    def write() -> None:
        nonlocal stored
        if not held:
            return
        part = [passages[i] for rows, _v in held for i in rows]
        vectors = np.vstack([v for _rows, v in held])
        if stored == 0:
            on_dimensions(int(vectors.shape[1]))
            before_write()
        store.upsert(scope, [p.id for p in part], vectors, [p.meta for p in part], [p.text for p in part])
        stored += len(part)
        held.clear()

    try:
        for start in range(0, len(order), chunk):
            for b in range(start, min(start + chunk, len(order)), step):
                rows = order[b : min(b + step, start + chunk)]
                held.append((rows, _embed(embedder, [passages[i] for i in rows], batch_size, progress)))
            write()
    except KeyboardInterrupt:
        # what was embedded is kept: the next sync embeds only the rest
        write()
        raise
    except EmbeddingUnavailable as e:
        write()
        return {passages[i].unit for i in order[stored:]}, e
    return set(), None


def _embed(embedder: Any, batch: list[Passage], batch_size: int, progress: Progress | None) -> np.ndarray:
    """One batch's vectors, a short turn's blended with its context's."""
    vectors = _embed_texts(embedder, [p.text for p in batch], batch_size, progress)
    rows = [n for n, p in enumerate(batch) if p.context]
    if rows:
        vectors = blend(vectors, rows, _embed_texts(embedder, [batch[n].context or "" for n in rows], batch_size, None))
    return vectors


def blend(vectors: np.ndarray, rows: list[int], context: np.ndarray) -> np.ndarray:
    """`vectors` with each of `rows` replaced by the unit-length sum of it and CONTEXT_WEIGHT times its context's
    vector (both made unit length first)."""
    out = np.array(vectors, dtype=np.float32, copy=True)
    mixed = _unit(out[rows]) + CONTEXT_WEIGHT * _unit(np.asarray(context, dtype=np.float32))
    out[rows] = _unit(mixed)
    return out


def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=1, keepdims=True)
    return v / np.where(n == 0, 1.0, n)


def _embed_texts(embedder, texts: list[str], batch_size: int, progress: Progress | None) -> np.ndarray:
    """Batch-encode, turning any failure into one EmbeddingError-style message."""
    try:
        return embedder.encode(texts, batch_size=batch_size, progress=progress)
    except MemclawError:
        raise
    except Exception as e:
        raise DerivedIndexError(f"embedding {counted(len(texts), 'memory')} failed: {type(e).__name__}: {e}") from e
