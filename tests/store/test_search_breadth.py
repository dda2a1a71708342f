"""memclaw's collections search the HNSW graph with memclaw's breadth (memclaw.store.chroma.EF_SEARCH), not
Chroma's default: new ones from the start, older ones from their next write. Real Chroma, embedded and server."""

from __future__ import annotations

from urllib.parse import urlparse

import numpy as np
import pytest

from memclaw.store.base import collection_name
from memclaw.store.chroma import EF_SEARCH, set_search_breadth
from memclaw.store.clients import open_chroma_store, release_embedded


def _vecs(n: int, seed: int = 5) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, 16)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _raw_client(backend: str, where):
    """A chromadb client of its own on the same store (embedded: the store released first, as a new process)."""
    import chromadb
    from chromadb.config import Settings

    if backend == "embedded":
        release_embedded(where)
        return chromadb.PersistentClient(path=str(where), settings=Settings(anonymized_telemetry=False))
    u = urlparse(where)
    return chromadb.HttpClient(host=u.hostname, port=u.port, settings=Settings(anonymized_telemetry=False))


def _breadth(client, ns: str, scope: str) -> int:
    col = client.get_collection(collection_name(ns, scope), embedding_function=None)
    return int(col.configuration["hnsw"]["ef_search"])


@pytest.fixture
def where(store_backend, tmp_path, request):
    if store_backend == "embedded":
        return tmp_path / "chroma"
    return request.getfixturevalue("chroma_server").url


@pytest.fixture
def ns(tmp_path):
    return f"ns-{tmp_path.name}"  # the server is shared by the session's tests


def _open(backend: str, where, ns: str):
    if backend == "embedded":
        return open_chroma_store(path=where, namespace=ns)
    return open_chroma_store(url=where, namespace=ns)


def test_a_new_collection_searches_with_memclaws_breadth(store_backend, where, ns):
    vecs = _vecs(40)
    store = _open(store_backend, where, ns)
    store.upsert("owner", [f"u{i}" for i in range(40)], vecs, [{}] * 40)
    raw = _raw_client(store_backend, where)
    assert _breadth(raw, ns, "owner") == EF_SEARCH
    assert raw.get_collection(collection_name(ns, "owner")).configuration["hnsw"]["space"] == "cosine"
    if store_backend == "embedded":
        release_embedded(where)
    # and it answers as before, read-only (a new process) and exactly
    cold = _open(store_backend, where, ns)
    hits = cold.query("owner", vecs[7], 5)
    assert hits[0].id == "u7" and hits[0].similarity == pytest.approx(1.0, abs=1e-5)


def test_a_collection_made_with_chromas_default_takes_memclaws_breadth_at_its_next_write(store_backend, where, ns):
    """An index built before memclaw set the breadth (Chroma's 100) is not rebuilt: its next write sets it."""
    vecs = _vecs(60)
    raw = _raw_client(store_backend, where)
    old = raw.create_collection(
        collection_name(ns, "owner"),
        embedding_function=None,
        configuration={"hnsw": {"space": "cosine"}},
        metadata={"memclaw_scope": "owner", "memclaw_namespace": ns},
    )
    old.add(ids=[f"u{i}" for i in range(50)], embeddings=vecs[:50])
    assert _breadth(raw, ns, "owner") == 100 < EF_SEARCH
    if store_backend == "embedded":
        release_embedded(where)

    reader = _open(store_backend, where, ns)
    assert reader.query("owner", vecs[3], 1)[0].id == "u3"  # a read changes nothing
    assert _breadth(_raw_client(store_backend, where), ns, "owner") == 100
    if store_backend == "embedded":
        release_embedded(where)

    writer = _open(store_backend, where, ns)
    writer.upsert("owner", [f"u{i}" for i in range(50, 60)], vecs[50:], [{}] * 10)
    assert _breadth(_raw_client(store_backend, where), ns, "owner") == EF_SEARCH
    if store_backend == "embedded":
        release_embedded(where)
    cold = _open(store_backend, where, ns)
    assert cold.count("owner") == 60
    assert [cold.query("owner", v, 1)[0].id for v in vecs[::7]] == [f"u{i}" for i in range(0, 60, 7)]


class _Refusing:
    """A collection whose server cannot change its configuration (the one fake here: the boundary's refusal)."""

    name = "memclaw-old"
    configuration = {"hnsw": {"space": "cosine", "ef_search": 100}}

    def __init__(self) -> None:
        self.asked = 0

    def modify(self, **_kw) -> None:
        self.asked += 1
        raise RuntimeError("configuration cannot be modified")


def test_a_store_that_cannot_change_the_breadth_is_searched_as_it_is(caplog):
    col = _Refusing()
    with caplog.at_level("INFO", logger="memclaw.store.chroma"):
        set_search_breadth(col)  # no error: writing and recalling go on
    assert col.asked == 1 and col.configuration["hnsw"]["ef_search"] == 100
    assert "keeps its HNSW search breadth 100" in caplog.text
