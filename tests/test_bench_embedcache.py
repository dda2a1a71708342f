"""`bench --embed-cache`: the model's vectors kept on disk, refused for another model."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from memclaw.bench.embedcache import CachedEmbedder
from memclaw.embedding import HashEmbedder
from memclaw.errors import UsageError


def test_cached_vectors_are_the_models_and_survive_the_process(tmp_path):
    path = tmp_path / "cache.pkl"
    inner = HashEmbedder()
    texts = ["Anna works at the library", "Lena lives in Porto", "Anna works at the library"]
    c = CachedEmbedder(inner, path)
    first = c.encode(texts)
    assert np.array_equal(first, inner.encode(texts))
    c.save()
    stored = pickle.loads(path.read_bytes())
    assert stored["fingerprint"] == inner.fingerprint and len(stored["vectors"]) == 2  # one per distinct text
    again = CachedEmbedder(HashEmbedder(), path)
    assert np.array_equal(again.encode(texts[:2]), first[:2])
    again.save()
    assert len(pickle.loads(path.read_bytes())["vectors"]) == 2  # nothing new was embedded
    assert again.fingerprint == inner.fingerprint and again.dim == inner.dim  # the rest is the inner embedder's
    assert np.array_equal(again.encode(["a query"]), inner.encode(["a query"]))
    again.save()
    assert len(pickle.loads(path.read_bytes())["vectors"]) == 2  # one text is a query: embedded live, not kept


def test_a_cache_of_another_model_or_a_torn_file_is_refused(tmp_path):
    path = tmp_path / "cache.pkl"
    c = CachedEmbedder(HashEmbedder(dim=64), path)
    c.encode(["x"])
    c.save()
    with pytest.raises(UsageError, match="holds vectors of hash-test/v1/d64"):
        CachedEmbedder(HashEmbedder(dim=32), path)
    path.write_bytes(path.read_bytes()[:10])
    with pytest.raises(UsageError, match="cannot read the embedding cache"):
        CachedEmbedder(HashEmbedder(dim=64), path)
