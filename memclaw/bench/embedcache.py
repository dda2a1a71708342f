"""`--embed-cache FILE`: the benchmark's text vectors kept on disk, so a second run embeds nothing it embedded
before (LongMemEval dev100 is ~27k passages: ~10 min of embedding on 2 cores, every run).

The vectors are the model's own, keyed by the text's sha1; the file records the model's fingerprint and is
refused for any other model. It is a numpy `.npz` archive of plain arrays (the fingerprint, the keys, the vectors),
read with `allow_pickle=False`: nothing in it can run code. Only batches are cached: a single text is a query
(recall embeds one at a time) and is embedded live, so the latency a benchmark reports still includes the query's
embedding. The cache is a bench tool: memclaw's index never reads it.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memclaw.errors import UsageError

# New vectors between two writes of the file
SAVE_EVERY = 2000


class CachedEmbedder:
    """An embedder whose `encode` answers from the cache file and embeds (and stores) only unseen texts."""

    def __init__(self, inner: Any, path: Path) -> None:
        self._inner = inner
        self.path = Path(path)
        self._vectors: dict[str, np.ndarray] = {}
        self._unsaved = 0
        # Batch texts answered from the file
        self.cached = 0
        # Batch texts the model embedded
        self.embedded = 0
        if self.path.exists():
            try:
                with np.load(io.BytesIO(self.path.read_bytes()), allow_pickle=False) as data:
                    fp, keys, vectors = str(data["fingerprint"]), data["keys"].tolist(), data["vectors"]
                if vectors.ndim != 2 or len(keys) != len(vectors) or not all(isinstance(k, str) for k in keys):
                    raise ValueError("keys and vectors differ")
            except Exception as e:
                raise UsageError(
                    f"cannot read the embedding cache {self.path} ({type(e).__name__}: {e}); delete it or pass "
                    "another file"
                ) from None
            if fp != inner.fingerprint:
                raise UsageError(
                    f"the embedding cache {self.path} holds vectors of {fp}, not {inner.fingerprint}; "
                    "pass another --embed-cache file for this model"
                )
            self._vectors = dict(zip(keys, vectors.astype(np.float32), strict=True))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: Any = None) -> np.ndarray:
        # A query (recall embeds one text): live, so the measured latency includes it
        if len(texts) == 1:
            return self._inner.encode(texts, batch_size=batch_size, progress=progress)
        keys = [hashlib.sha1(t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts]
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in self._vectors}
        self.cached += len(keys) - len(todo)
        self.embedded += len(todo)
        if todo:
            new = self._inner.encode(list(todo.values()), batch_size=batch_size, progress=progress)
            for k, v in zip(todo, new, strict=True):
                self._vectors[k] = np.asarray(v, dtype=np.float32)
            self._unsaved += len(todo)
            if self._unsaved >= SAVE_EVERY:
                self.save()
        if not keys:
            return np.zeros((0, self._inner.dim), dtype=np.float32)
        return np.stack([self._vectors[k] for k in keys])

    def save(self) -> None:
        if not self._unsaved and self.path.exists():
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        keys = list(self._vectors)
        vectors = np.stack([self._vectors[k] for k in keys]) if keys else np.zeros((0, self._inner.dim), np.float32)
        buf = io.BytesIO()
        np.savez(buf, fingerprint=np.array(self._inner.fingerprint), keys=np.array(keys, dtype="U40"), vectors=vectors)
        tmp.write_bytes(buf.getvalue())
        tmp.replace(self.path)
        self._unsaved = 0
