"""The Chroma vector store seam, embedded and client/server, with real Chroma."""

import numpy as np
import pytest

from memclaw.errors import VectorStoreUnavailable
from memclaw.store.base import collection_name, distance_to_similarity
from memclaw.store.clients import open_chroma_store
from tests.chroma_server import free_port


@pytest.fixture
def store(store_backend, tmp_path, request):
    if store_backend == "embedded":
        return open_chroma_store(path=tmp_path / "chroma", namespace="ns-test")
    server = request.getfixturevalue("chroma_server")
    return open_chroma_store(url=server.url, namespace=f"ns-{tmp_path.name}")


def _unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_distance_conversion():
    assert distance_to_similarity(0.0, "cosine") == 1.0
    assert distance_to_similarity(2.0, "cosine") == -1.0
    assert distance_to_similarity(4.0, "l2") == -1.0


def test_collection_names_are_valid_and_distinct():
    a, b = collection_name("ns", "owner"), collection_name("ns", "people/discord:1")
    assert a != b and 3 <= len(a) <= 512 and a.replace("-", "").isalnum()


def test_upsert_query_returns_cosine_similarity(store):
    vecs = np.stack([_unit([1, 0, 0]), _unit([0, 1, 0]), _unit([1, 1, 0])])
    store.upsert("owner", ["a", "b", "c"], vecs, [{"kind": "fact"}] * 3)
    hits = store.query("owner", _unit([1, 0, 0]), 3)
    assert [h.id for h in hits] == ["a", "c", "b"]
    assert hits[0].similarity == pytest.approx(1.0, abs=1e-5)
    assert hits[1].similarity == pytest.approx(np.sqrt(0.5), abs=1e-4)
    assert hits[2].similarity == pytest.approx(0.0, abs=1e-5)
    assert store.ids("owner") == {"a", "b", "c"} and store.count("owner") == 3


def test_scopes_are_separate_collections(store):
    store.upsert("owner", ["secret"], np.stack([_unit([1, 0])]), [{"kind": "fact"}])
    store.upsert("people/x", ["mine"], np.stack([_unit([1, 0])]), [{"kind": "fact"}])
    assert [h.id for h in store.query("people/x", _unit([1, 0]), 10)] == ["mine"]
    assert store.query("people/nobody", _unit([1, 0]), 10) == []


def test_delete_and_drop(store):
    store.upsert("owner", ["a", "b"], np.stack([_unit([1, 0]), _unit([0, 1])]), [{}, {}])
    store.delete("owner", ["a", "missing"])
    assert store.ids("owner") == {"b"}
    store.drop("owner")
    assert store.ids("owner") == set() and store.count("owner") == 0


def test_unreachable_server_is_a_clear_error():
    with pytest.raises(VectorStoreUnavailable, match="unreachable"):
        store = open_chroma_store(url=f"http://127.0.0.1:{free_port()}", namespace="n")
        store.count("owner")


def test_frozen_server_costs_one_timeout_then_recall_answers_from_bm25(tmp_path, embedder):
    # A real `chroma run`, frozen with SIGSTOP: requests are accepted by the kernel but never answered.
    import os
    import signal

    from memclaw.config import Config
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace
    from tests.chroma_server import ChromaServer

    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text("- My sister Lena lives in Porto\n- I am allergic to penicillin\n")
    server = ChromaServer(tmp_path / "chroma").start()
    try:
        cfg = Config(workspace=root)
        cfg.memory.chroma_url = server.url
        cfg.memory.chroma_timeout_s = 1.0
        warm = MemoryService(Workspace(root), cfg, embedder=embedder)
        assert warm.recall_detailed("where does Lena live").hits[0].vector.rank == 1
        reader = MemoryService(Workspace(root), cfg, embedder=embedder)  # only reads: the HTTP reader, no client
        assert reader.recall_detailed("where does Lena live").hits[0].vector.rank == 1
        assert reader.store._client_obj is None
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            # the open client, the open reader, then a new service
            for svc in (warm, reader, MemoryService(Workspace(root), cfg, embedder=embedder)):
                r = svc.recall_detailed("where does Lena live")
                assert [h.unit.text for h in r.hits][:1] == ["My sister Lena lives in Porto"]
                assert r.hits[0].vector.rank is None  # BM25 alone
                assert any("did not answer in time" in w and "fell back to BM25" in w for w in r.warnings), r.warnings
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        assert warm.recall_detailed("where does Lena live").hits[0].vector.rank == 1  # back once it answers
        warm.close()
    finally:
        server.stop()


# ----- the engine reader: a cold embedded store answers queries without importing the chromadb package -----


def _fill(path, n=120, seed=7):
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    s = open_chroma_store(path=path, namespace="ns-test")
    s.upsert("owner", [f"u{i}" for i in range(n)], vecs, [{}] * n)
    s.upsert("people/x", ["theirs"], vecs[:1], [{}])
    return s, vecs


def test_engine_reader_answers_exactly_like_the_client(tmp_path):
    from memclaw.store.clients import release_embedded

    path = tmp_path / "chroma"
    client_store, vecs = _fill(path)
    want = [client_store.query("owner", v, 10) for v in vecs[:20]]
    release_embedded(path)  # as if this were a new process

    cold = open_chroma_store(path=path, namespace="ns-test")
    cold.warm("owner")
    got = [cold.query("owner", v, 10) for v in vecs[:20]]
    assert cold._client_obj is None, "a read-only store must not have opened the chromadb client"
    assert [[h.id for h in hits] for hits in got] == [[h.id for h in hits] for hits in want]
    for g, w in zip(got, want, strict=True):
        assert [h.similarity for h in g] == pytest.approx([h.similarity for h in w], abs=1e-6)
    # scopes stay apart through the reader too, and a scope with no collection is simply empty
    assert [h.id for h in cold.query("people/x", vecs[0], 10)] == ["theirs"]
    assert cold.query("people/nobody", vecs[0], 10) == []
    cold.warm("people/nobody")


def test_a_write_in_this_process_retires_the_engine_reader(tmp_path):
    """The client keeps its own copy of the index: once it writes, reads must go through it, in every store
    object of this process that reads the same files."""
    from memclaw.store.clients import release_embedded

    path = tmp_path / "chroma"
    _, vecs = _fill(path)
    release_embedded(path)
    reader_store = open_chroma_store(path=path, namespace="ns-test")
    assert reader_store.query("owner", vecs[3], 1)[0].id == "u3"
    writer = open_chroma_store(path=path, namespace="ns-test")
    fresh = _unit(vecs[3] + 0.01 * vecs[4])
    writer.upsert("owner", ["new"], fresh[None, :], [{}])
    writer.delete("owner", ["u3"])
    assert [h.id for h in reader_store.query("owner", fresh, 1)] == ["new"]
    assert "u3" not in {h.id for h in reader_store.query("owner", vecs[3], 20)}


def test_an_unreadable_store_falls_back_to_the_client_and_its_errors(tmp_path):
    """Whatever the engine reader cannot do is left to the client, which reports it the usual way."""
    from memclaw.errors import DerivedIndexError
    from memclaw.store.clients import release_embedded

    path = tmp_path / "chroma"
    _, vecs = _fill(path)
    release_embedded(path)
    (path / "chroma.sqlite3").write_bytes(b"this is not a database" * 100)
    damaged = open_chroma_store(path=path, namespace="ns-test")
    with pytest.raises(DerivedIndexError, match="reindex"):
        damaged.query("owner", vecs[0], 5)


def test_engine_reader_serves_concurrent_queries(tmp_path):
    """The gateway recalls from worker threads: the engine reader answers them at once, as it does one by one."""
    from concurrent.futures import ThreadPoolExecutor

    from memclaw.store.clients import release_embedded

    path = tmp_path / "chroma"
    _, vecs = _fill(path, n=300)
    release_embedded(path)
    cold = open_chroma_store(path=path, namespace="ns-test")
    serial = [[h.id for h in cold.query("owner", v, 5)] for v in vecs[:60]]
    with ThreadPoolExecutor(4) as pool:
        parallel = list(pool.map(lambda v: [h.id for h in cold.query("owner", v, 5)], vecs[:60]))
    assert parallel == serial and all(s[0] == f"u{i}" for i, s in enumerate(serial))
    assert cold._client_obj is None


def test_http_reader_answers_exactly_like_the_client(chroma_server, tmp_path):
    """Against a server, a store that only reads queries Chroma's REST API with httpx, without chromadb's client."""
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(80, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ns = f"ns-{tmp_path.name}"
    writer = open_chroma_store(url=chroma_server.url, namespace=ns)
    writer.upsert("owner", [f"u{i}" for i in range(80)], vecs, [{}] * 80)
    want = [writer.query("owner", v, 7) for v in vecs[:15]]

    cold = open_chroma_store(url=chroma_server.url, namespace=ns)
    cold.warm("owner")
    got = [cold.query("owner", v, 7) for v in vecs[:15]]
    assert cold._client_obj is None
    assert [[h.id for h in g] for g in got] == [[h.id for h in w] for w in want]
    for g, w in zip(got, want, strict=True):
        assert [h.similarity for h in g] == pytest.approx([h.similarity for h in w], abs=1e-6)
    assert cold.query("people/nobody", vecs[0], 5) == []
    # a write through another store is seen at once (the server holds the one copy)
    writer.upsert("owner", ["late"], vecs[:1], [{}])
    writer.delete("owner", ["u0"])
    assert cold.query("owner", vecs[0], 1)[0].id == "late"
    # a dropped collection: the reader gives up and the client answers (nothing there)
    writer.drop("owner")
    assert cold.query("owner", vecs[0], 3) == []


def test_a_store_released_under_its_client_connects_again(tmp_path):
    """Another service of this process wipes the embedded store (a rebuild releases chromadb's shared system and
    removes the folder): a store opened before keeps working on the new files instead of failing on a stopped system
    (found by the sync property test: recall opened the store, another service made the first sync)."""
    import shutil

    from memclaw.store.clients import release_embedded

    path = tmp_path / "chroma"
    first = open_chroma_store(path=path, namespace="ns")
    vec = np.eye(4, dtype=np.float32)[:1]
    first.upsert("owner", ["a"], vec, [{"kind": "fact"}], ["old"])
    release_embedded(path)
    shutil.rmtree(path)
    second = open_chroma_store(path=path, namespace="ns")
    second.upsert("owner", ["b"], vec, [{"kind": "fact"}], ["new"])
    assert first.texts("owner") == {"b": "new"}  # the files as they are now, through a client of its own
    first.upsert("owner", ["c"], vec, [{"kind": "fact"}], ["later"])
    assert second.texts("owner") == {"b": "new", "c": "later"}
