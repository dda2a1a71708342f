"""The "hash-test" embedder: deterministic hashed word and character n-grams, no model; for pure-logic tests."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence

import numpy as np

from memclaw.embedding.base import Progress, batches, normalize_rows

HASH_TEST_MODEL = "hash-test"


class HashEmbedder:
    """Deterministic, model-free: signed hashing of word unigrams and character 3-grams. Texts that share
    words or spellings get close vectors; no semantics. For pure-logic unit tests ("hash-test")."""

    def __init__(self, dim: int = 64) -> None:
        self.name = HASH_TEST_MODEL
        self.dim = dim
        self.fingerprint = f"{HASH_TEST_MODEL}/v1/d{dim}"

    def _features(self, text: str) -> Iterator[tuple[str, float]]:
        words = re.findall(r"\w+", text.lower())
        for w in words:
            yield "w:" + w, 1.0
            padded = f"#{w}#"
            for i in range(len(padded) - 2):
                yield "c:" + padded[i : i + 3], 0.5

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for feat, weight in self._features(text):
            d = hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest()
            idx = int.from_bytes(d[:4], "little") % self.dim
            v[idx] += weight if d[4] & 1 else -weight
        if not v.any():
            # empty or symbol-only text: a fixed unit vector
            v[0] = 1.0
        return v

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start, end in batches(len(texts), batch_size):
            for i in range(start, end):
                out[i] = self._one(texts[i])
            if progress:
                progress(end - start)
        return normalize_rows(out) if len(texts) else out

    def warm_up(self) -> None:
        return None
