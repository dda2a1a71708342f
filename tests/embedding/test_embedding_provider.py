"""Embeddings from the user's provider (issue 14): litellm over real HTTP against a local OpenAI-compatible
/v1/embeddings server (tests/embedding_server.py), real Markdown, real Chroma, the real CLI entry point."""

from __future__ import annotations

import logging
from datetime import date

import numpy as np
import pytest

from memclaw.config import Config, EmbeddingsConfig
from memclaw.embedding.load import load_embedder
from memclaw.embedding.provider import ProviderEmbedder
from memclaw.errors import EmbeddingAuthError, EmbeddingUnavailable
from memclaw.index import layout as ix
from memclaw.service.facade import MemoryService
from tests.embedding_server import ScriptedEmbeddingServer, embedding_server
from tests.llm_server import Scripted
from tests.service.test_faults import run_cli
from tests.service.test_memory_service import make_workspace

MODEL = "openai/text-embedding-hashed"
UNITS = 7  # facts + history entries of make_workspace


@pytest.fixture
def server():
    with embedding_server() as s:
        yield s


def emb_config(server: ScriptedEmbeddingServer, **kw) -> EmbeddingsConfig:
    return EmbeddingsConfig(model=MODEL, api_base=server.url, api_key="sk-test-not-a-real-key", **kw)


def service(tmp_path, server, *, embedder=None, **kw) -> MemoryService:
    ws = make_workspace(tmp_path / "ws") if not (tmp_path / "ws").exists() else _ws(tmp_path)
    cfg = Config(workspace=ws.root, embeddings=emb_config(server, **kw))
    return MemoryService(ws, cfg, embedder=embedder)


def _ws(tmp_path):
    from memclaw.workspace import Workspace

    return Workspace(tmp_path / "ws")


def fast(server, **kw) -> ProviderEmbedder:
    """The real provider embedder with a short backoff (passed in through the seam, as the CLI's would be)."""
    return ProviderEmbedder(emb_config(server, **kw), backoff_base_s=0.01, max_backoff_s=0.05)


def env_for(monkeypatch, server, ws_root, **extra: str) -> None:
    monkeypatch.setenv("MEMCLAW_WORKSPACE", str(ws_root))
    monkeypatch.setenv("MEMCLAW_EMBEDDINGS__MODEL", MODEL)
    monkeypatch.setenv("MEMCLAW_EMBEDDINGS__API_BASE", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    for k, v in extra.items():
        monkeypatch.setenv(k, v)


# ----- 1. the model name picks the provider; recall goes through it ----------------------------------------------
def test_a_provider_model_name_loads_the_provider_embedder_and_a_bare_name_stays_local(server):
    emb = load_embedder(emb_config(server))
    assert isinstance(emb, ProviderEmbedder) and emb.fingerprint == f"litellm:{MODEL}"
    assert not isinstance(load_embedder(EmbeddingsConfig(model="hash-test")), ProviderEmbedder)
    assert server.requests == []  # loading asks nothing
    assert emb.dim == 96 and len(server.requests) == 1  # dimensions: read from the first response...
    assert fast(server).dim == 96 and len(server.requests) == 1  # ...and remembered on disk


def test_recall_through_the_provider(tmp_path, server):
    svc = service(tmp_path, server)
    assert isinstance(svc.embedder, ProviderEmbedder)
    res = svc.recall_detailed("battery engineer at Solaris", k=3, mode="vector")
    assert "Solaris Energy" in res.hits[0].unit.text and res.hits[0].vector.rank == 1
    assert not res.warnings
    hybrid = svc.recall_detailed("where does my sister live", k=1)
    assert "Lena lives in Porto" in hybrid.hits[0].unit.text and hybrid.hits[0].vector.rank is not None
    assert ix.read_manifest(svc.layout)["dimensions"] == 96
    assert sum(len(i) for i in server.inputs) == UNITS + 2  # every unit once, each query once
    svc.close()


# ----- 2. batching, retries, no retry on 401, timeouts, input cut -----------------------------------------------
def test_documents_go_in_batches_of_the_configured_size(tmp_path, server):
    svc = service(tmp_path, server, batch_size=3)
    (report,) = svc.sync(["owner"])
    assert report.added == UNITS
    assert [len(i) for i in server.inputs] == [3, 3, 1]
    svc.close()


def test_a_429_is_retried_then_succeeds(server):
    server.status(429, headers={"Retry-After": "0"})
    vecs = fast(server).encode(["my sister Lena", "Porto"])
    assert vecs.shape == (2, 96) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0)
    assert len(server.requests) == 2 and server.inputs[0] == server.inputs[1]


def test_5xx_until_the_retries_run_out_is_unavailable(server):
    server.status(503, times=3)
    with pytest.raises(EmbeddingUnavailable, match="unavailable after 3 attempt"):
        fast(server, max_retries=2).encode(["x"])
    assert len(server.requests) == 3


def test_a_rejected_key_is_not_retried(server):
    server.status(401)
    with pytest.raises(EmbeddingAuthError, match="set OPENAI_API_KEY"):
        fast(server).encode(["x"])
    assert len(server.requests) == 1


def test_401_exits_5_with_one_line_naming_the_key(tmp_path, server, monkeypatch, capsys):
    ws = make_workspace(tmp_path / "ws")
    env_for(monkeypatch, server, ws.root)
    server.status(401)
    code, out, err = run_cli(monkeypatch, capsys, "recall", "where does Lena live")
    assert code == 5
    assert err.strip().count("\n") == 0 and "OPENAI_API_KEY" in err and "Traceback" not in err
    assert "sk-test" not in err + out
    assert len(server.requests) == 1


def test_a_timeout_counts_as_unavailable(server):
    server.push(Scripted(delay=3))
    with pytest.raises(EmbeddingUnavailable, match=r"no answer from http://127.0.0.1:\d+/v1 within 0.3 s"):
        fast(server, timeout_s=0.3, max_retries=0).encode(["x"])


def test_long_input_is_cut_to_the_model_limit(server):
    fast(server, max_input_tokens=50).encode(["word " * 500])
    sent = server.inputs[0][0]
    assert 0 < len(sent.split()) <= 50


# ----- 3. query cache --------------------------------------------------------------------------------------------
def test_a_repeated_query_costs_no_request(tmp_path, server):
    svc = service(tmp_path, server)
    svc.sync()
    before = len(server.requests)
    svc.recall("where does my sister live", k=1)
    assert len(server.requests) == before + 1
    again = service(tmp_path, server)  # a new process: the cache is on disk
    hit = again.recall_detailed("where does my sister live", k=1).hits[0]
    assert hit.vector.rank is not None
    assert len(server.requests) == before + 1
    again.recall("where is my manager", k=1)
    assert len(server.requests) == before + 2
    svc.close()
    again.close()


def test_unchanged_units_are_never_embedded_again(tmp_path, server):
    svc = service(tmp_path, server)
    svc.sync()
    n = len(server.requests)
    svc.add_fact("My bike is a green Brompton", learned=date(2026, 11, 26))
    assert server.inputs[n:] == [["My bike is a green Brompton (2026-11-26)"]]
    svc.close()


# ----- 4. model change: one rebuild, said once with its cost ------------------------------------------------------
def test_switching_to_the_provider_rebuilds_once_saying_why(tmp_path, server, caplog):
    ws = make_workspace(tmp_path / "ws")
    local = MemoryService(ws, Config(workspace=ws.root, embeddings=EmbeddingsConfig(model="hash-test")))
    local.sync()
    local.close()
    caplog.set_level(logging.WARNING, logger="memclaw.index.identity")
    svc = service(tmp_path, server)
    assert svc.stats()["rebuild"].startswith("the embedding model changed (hash-test/v1/d64 -> litellm:")
    hit = svc.recall_detailed("where does my sister live", k=1).hits[0]
    assert hit.vector.rank is not None
    lines = [r.getMessage() for r in caplog.records if "rebuilding the index" in r.getMessage()]
    assert lines == [
        f"rebuilding the index: the embedding model changed (hash-test/v1/d64 -> litellm:{MODEL}); "
        f"{UNITS} memories to embed"
    ]
    svc.sync()
    svc2 = service(tmp_path, server)
    (report,) = svc2.sync(["owner"])
    assert not report.rebuilt and report.added == 0
    assert len([r for r in caplog.records if "rebuilding the index" in r.getMessage()]) == 1
    svc.close()
    svc2.close()


# ----- 5. outage: BM25 with a warning, `memory add` keeps the fact, catch-up later ----------------------------------
def test_outage_falls_back_to_bm25_and_catches_up(tmp_path, server):
    svc = service(tmp_path, server, embedder=fast(server, max_retries=1))
    svc.sync()
    server.default = Scripted(status=503)  # the provider goes down
    unit = svc.add_fact("My kayak is moored at the Quai Rambaud")
    assert "Quai Rambaud" in (svc.workspace.memory_file("owner")).read_text("utf-8")
    assert svc.pending_vectors("owner") == {unit.id}
    owner = svc.stats()["scopes"]["owner"]
    assert owner["vectors_pending"] == 1 and owner["fresh"] is False
    res = svc.recall_detailed("kayak moored", k=1)
    assert res.hits[0].unit.id == unit.id and res.hits[0].vector.rank is None  # keyword search has it
    assert any("recall fell back to BM25 only" in w for w in res.warnings)

    server.default = Scripted()  # back
    later = service(tmp_path, server)  # a later process
    res = later.recall_detailed("kayak moored", k=1)
    assert res.hits[0].unit.id == unit.id and res.hits[0].vector.rank is not None
    assert not res.warnings and later.pending_vectors("owner") == set()
    assert any("Quai Rambaud" in t for t in later.store.texts("owner").values())
    svc.close()
    later.close()


def test_memory_add_during_an_outage_writes_the_markdown_and_says_the_vector_is_pending(
    tmp_path, server, monkeypatch, capsys
):
    ws = make_workspace(tmp_path / "ws")
    env_for(monkeypatch, server, ws.root, MEMCLAW_EMBEDDINGS__MAX_RETRIES="0")
    assert run_cli(monkeypatch, capsys, "memory", "sync")[0] == 0
    server.default = Scripted(status=503)
    code, out, err = run_cli(monkeypatch, capsys, "memory", "add", "My kayak is moored at the Quai Rambaud")
    assert code == 0, err
    assert "vector is pending" in out
    assert "Quai Rambaud" in ws.memory_file("owner").read_text("utf-8")
    code, out, err = run_cli(monkeypatch, capsys, "recall", "kayak", "--json")
    assert code == 0 and "Quai Rambaud" in out and "fell back to BM25" in err
    server.default = Scripted()
    code, out, _ = run_cli(monkeypatch, capsys, "memory", "sync", "--json")
    assert code == 0
    code, out, err = run_cli(monkeypatch, capsys, "recall", "kayak", "--json", "--mode", "vector")
    assert code == 0 and "Quai Rambaud" in out and not err


# ----- 6. benchmarks compare models side by side -------------------------------------------------------------------
def test_bench_longmemeval_compares_embedding_models_side_by_side(tmp_path, server, monkeypatch, capsys):
    import json

    from tests.bench.test_bench_run import FIXTURE

    monkeypatch.setenv("MEMCLAW_EMBEDDINGS__API_BASE", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    out = tmp_path / "out"
    code, stdout, err = run_cli(
        monkeypatch, capsys, "bench", "longmemeval", "--data", str(FIXTURE), "--systems", "grep,vector",
        "--embeddings", f"hash-test,{MODEL}", "--out", str(out), "--no-progress",
    )  # fmt: skip
    assert code == 0, err
    res = json.loads((out / "longmemeval.json").read_text())
    assert list(res["systems"]) == ["grep", "vector · hash-test", f"vector · {MODEL}"]
    assert res["config"]["embeddings_model"] == f"hash-test, {MODEL}"
    assert res["systems"][f"vector · {MODEL}"]["recall_any@10"] > 0
    assert server.requests  # the provider model really embedded the haystacks
    assert f"vector · {MODEL}" in (out / "longmemeval.md").read_text()


def test_a_bm25_recall_waits_for_no_pending_vector(tmp_path, server):
    """After an outage (or an interrupted sync) vectors are pending. A recall in a mode that uses no vectors does
    not embed them first (it took ~8 minutes after an interrupted 100k sync): no request reaches the provider, the
    keyword hit is served, the vectors stay pending for the next sync; a new fact is found by keyword at once."""
    svc = service(tmp_path, server, embedder=fast(server, max_retries=1))
    svc.sync()
    server.default = Scripted(status=503)
    unit = svc.add_fact("My kayak is moored at the Quai Rambaud")
    assert svc.pending_vectors("owner") == {unit.id}
    svc.close()
    server.default = Scripted()  # back: a hybrid recall would embed the pending vector first
    later = service(tmp_path, server)
    with later.workspace.memory_file("owner").open("a", encoding="utf-8") as f:
        f.write("- My canoe is red\n")
    asked = len(server.requests)
    res = later.recall_detailed("kayak moored", k=1, mode="bm25")
    assert res.hits[0].unit.id == unit.id
    assert later.recall_detailed("canoe red", k=1, mode="bm25").hits[0].unit.text.startswith("My canoe is red")
    assert len(server.requests) == asked  # nothing embedded
    assert unit.id in later.pending_vectors("owner") and len(later.pending_vectors("owner")) == 2
    (report,) = later.sync(["owner"])  # the next sync embeds both
    assert later.pending_vectors("owner") == set() and len(server.requests) > asked
    later.close()
