"""`bench --embed-cache`: the model's vectors kept on disk, refused for another model."""

from __future__ import annotations

import io

import numpy as np
import pytest

from memclaw.bench.embedcache import CachedEmbedder
from memclaw.embedding._hashing import HashEmbedder
from memclaw.errors import UsageError


def _stored(path):
    with np.load(io.BytesIO(path.read_bytes()), allow_pickle=False) as data:
        return {"fingerprint": str(data["fingerprint"]), "vectors": data["vectors"]}


def test_cached_vectors_are_the_models_and_survive_the_process(tmp_path):
    path = tmp_path / "cache.npz"
    inner = HashEmbedder()
    texts = ["Anna works at the library", "Lena lives in Porto", "Anna works at the library"]
    c = CachedEmbedder(inner, path)
    first = c.encode(texts)
    assert np.array_equal(first, inner.encode(texts))
    c.save()
    stored = _stored(path)
    assert stored["fingerprint"] == inner.fingerprint and len(stored["vectors"]) == 2  # one per distinct text
    again = CachedEmbedder(HashEmbedder(), path)
    assert np.array_equal(again.encode(texts[:2]), first[:2])
    again.save()
    assert len(_stored(path)["vectors"]) == 2  # nothing new was embedded
    assert again.fingerprint == inner.fingerprint and again.dim == inner.dim  # the rest is the inner embedder's
    assert np.array_equal(again.encode(["a query"]), inner.encode(["a query"]))
    again.save()
    assert len(_stored(path)["vectors"]) == 2  # one text is a query: embedded live, not kept


def test_a_cache_of_another_model_or_a_torn_file_is_refused(tmp_path):
    path = tmp_path / "cache.npz"
    c = CachedEmbedder(HashEmbedder(dim=64), path)
    c.encode(["x"])
    c.save()
    with pytest.raises(UsageError, match="holds vectors of hash-test/v1/d64"):
        CachedEmbedder(HashEmbedder(dim=32), path)
    path.write_bytes(path.read_bytes()[:10])
    with pytest.raises(UsageError, match="cannot read the embedding cache"):
        CachedEmbedder(HashEmbedder(dim=64), path)


def test_a_pickled_cache_is_refused_unread(tmp_path):
    """A cache file of the old (pickle) format, or a crafted one, is refused without being unpickled."""
    import os
    import pickle

    marker = tmp_path / "ran"

    class RunsCode:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path = tmp_path / "cache.pkl"
    path.write_bytes(pickle.dumps({"fingerprint": "hash-test/v1/d64", "vectors": RunsCode()}))
    with pytest.raises(UsageError, match="cannot read the embedding cache"):
        CachedEmbedder(HashEmbedder(dim=64), path)
    assert not marker.exists()
