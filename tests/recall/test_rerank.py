"""The re-ranking seam (recall.rerank): a provider's rerank API through litellm against a scripted rerank server over
real HTTP, the failures that must keep the fused order, and recall unchanged when no re-ranker is configured. Real
Markdown, the bundled model, embedded Chroma."""

from __future__ import annotations

import socket

import pytest

from memclaw.config import Config
from memclaw.service.facade import MemoryService
from memclaw.workspace import Workspace
from tests.llm_server import Scripted
from tests.rerank_server import rerank_server
from tests.service.test_memory_service import make_workspace

MEMORY = """# People
- Anna works at Zeiss in Jena as an optical engineer
- Anna's brother Tom works at a bakery in Leipzig
- Anna likes kayaking on the Saale on weekends
- Tom's bakery sells rye bread on Saturdays
- Maria works at the university library
- Anna and Maria met at work in 2019
"""
QUERY = "where does Anna work"


@pytest.fixture
def server():
    with rerank_server() as s:
        yield s


def _service(tmp_path, embedder, **rerank) -> MemoryService:
    root = tmp_path / "ws"
    ws = make_workspace(root, memory=MEMORY, history="") if not root.exists() else Workspace(root)
    cfg = Config(workspace=ws.root, recall={"rerank": rerank} if rerank else {})
    return MemoryService(ws, cfg, embedder=embedder)


def _ids(result) -> list[str]:
    return [h.unit.id for h in result.hits]


def _dead_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_off_by_default_recall_is_unchanged(tmp_path, embedder) -> None:
    svc = _service(tmp_path, embedder)
    try:
        assert svc.config.recall.rerank.kind == "off"
        res = svc.recall_detailed(QUERY, k=4)
        same = svc.recall_detailed(QUERY, k=4, rerank=False)
        assert res.rerank is None and len(res.hits) == 4
        assert [(h.unit.id, h.score) for h in res.hits] == [(h.unit.id, h.score) for h in same.hits]
        assert all(h.rerank is None and "rerank" not in h.to_json() for h in res.hits)
        assert "rerank" not in res.timings_ms
    finally:
        svc.close()


def test_a_provider_reranker_reorders_the_first_top_n(tmp_path, embedder, server) -> None:
    svc = _service(tmp_path, embedder)
    fused = svc.recall_detailed(QUERY, k=6)
    svc.close()
    svc = _service(tmp_path, embedder, kind="provider", model="infinity/bge-reranker", api_base=server.base, top_n=4)
    try:
        # the server scores the 4 candidates in reverse of the order they were sent in
        server.results([(3, 0.9), (2, 0.7), (1, 0.5), (0, 0.1)])
        res = svc.recall_detailed(QUERY, k=6)
        sent = server.requests[-1]
        assert sent["query"] == QUERY and len(sent["documents"]) == 4
        # the documents are the first 4 fused hits' texts, in fused order
        assert sent["documents"] == [h.unit.text for h in fused.hits[:4]]
        want = list(reversed(_ids(fused)[:4])) + _ids(fused)[4:]
        assert _ids(res) == want
        n = len(fused.hits)
        assert n > 4
        assert [h.rerank.fused_rank for h in res.hits] == [4, 3, 2, 1, *range(5, n + 1)]
        assert [h.rerank.rank for h in res.hits] == [1, 2, 3, 4] + [None] * (n - 4)
        assert [h.rerank.score for h in res.hits[:4]] == [0.9, 0.7, 0.5, 0.1]
        assert res.rerank.ok and res.rerank.by == "provider:infinity/bge-reranker" and res.rerank.reranked == 4
        assert res.rerank.prompt_tokens is None and not res.warnings
        assert res.hits[0].to_json()["rerank"] == {"fused_rank": 4, "rank": 1, "score": 0.9}
    finally:
        svc.close()


def test_a_cohere_reranker_at_a_named_endpoint_sends_its_key(tmp_path, embedder, server) -> None:
    svc = _service(tmp_path, embedder, kind="provider", model="cohere/rerank-v3.5", api_base=server.base,
                   api_key="co-test-key-123")  # fmt: skip
    try:
        res = svc.recall_detailed(QUERY, k=3)
        assert res.rerank.ok and res.rerank.reranked == len(server.requests[-1]["documents"])
        assert server.headers[-1]["authorization"] == "Bearer co-test-key-123"
        # the server's own order (query words held) is the order of the hits
        docs = server.requests[-1]["documents"]
        from tests.rerank_server import overlap_score

        best = sorted(docs, key=lambda d: -overlap_score(QUERY, d))[:3]
        assert [h.unit.text for h in res.hits] == best
    finally:
        svc.close()


def test_a_local_tei_server_by_its_address(tmp_path, embedder, server) -> None:
    svc = _service(tmp_path, embedder, kind="provider", model="huggingface/BAAI/bge-reranker-base",
                   api_base=server.base)  # fmt: skip
    try:
        res = svc.recall_detailed(QUERY, k=3)
        sent = server.requests[-1]
        # Text Embeddings Inference's own request: `texts`, not `documents`
        assert res.rerank.ok and sent["query"] == QUERY and len(sent["texts"]) == res.rerank.reranked
        from tests.rerank_server import overlap_score

        best = sorted(sent["texts"], key=lambda d: -overlap_score(QUERY, d))[:3]
        assert [h.unit.text for h in res.hits] == best
    finally:
        svc.close()


FAILURES = {
    "500": lambda s: s.status(500),
    "malformed JSON": lambda s: s.raw("{not json"),
    "index out of range": lambda s: s.results([(0, 0.5), (17, 0.9)]),
    "index twice": lambda s: s.results([(0, 0.5), (0, 0.9)]),
    "score not a number": lambda s: s.results([(0, "high")]),
    "timeout": lambda s: s.push(Scripted(delay=5)),
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_failing_reranker_keeps_the_fused_order_and_says_so_once(tmp_path, embedder, server, failure) -> None:
    svc = _service(tmp_path, embedder)
    fused = svc.recall_detailed(QUERY, k=4)
    svc.close()
    svc = _service(tmp_path, embedder, kind="provider", model="infinity/bge", api_base=server.base, timeout_s=0.5)
    try:
        FAILURES[failure](server)
        res = svc.recall_detailed(QUERY, k=4)
        assert [(h.unit.id, h.score) for h in res.hits] == [(h.unit.id, h.score) for h in fused.hits]
        assert [h.rerank.rank for h in res.hits] == [None] * 4
        assert [h.rerank.fused_rank for h in res.hits] == [1, 2, 3, 4]
        assert not res.rerank.ok and res.rerank.error
        assert len(res.warnings) == 1 and res.warnings[0].startswith("re-ranking failed, the fused order stands")
        assert "\n" not in res.warnings[0]
        asked = len(server.requests)
        # not asked again within the command: no request, no second warning, the report says why
        again = svc.recall_detailed("Tom bakery", k=4)
        assert len(server.requests) == asked
        assert not again.warnings and not again.rerank.ok and again.rerank.skipped
        assert again.rerank.error.startswith("not asked") and again.rerank.to_json()["skipped"] is True
    finally:
        svc.close()


def test_a_dead_rerank_server_costs_one_attempt(tmp_path, embedder) -> None:
    base = f"http://127.0.0.1:{_dead_port()}"
    svc = _service(tmp_path, embedder, kind="provider", model="infinity/bge", api_base=base)
    try:
        res = svc.recall_detailed(QUERY, k=3)
        assert len(res.hits) == 3 and not res.rerank.ok
        assert "could not connect" in res.rerank.error and len(res.warnings) == 1
        again = svc.recall_detailed(QUERY, k=3).rerank
        assert again.skipped and again.error.startswith("not asked")
    finally:
        svc.close()


def test_a_provider_without_its_key_is_one_line_and_no_request(tmp_path, embedder, server, monkeypatch) -> None:
    monkeypatch.delenv("COHERE_API_KEY", raising=False)
    monkeypatch.delenv("CO_API_KEY", raising=False)
    svc = _service(tmp_path, embedder, kind="provider", model="cohere/rerank-v3.5")
    try:
        res = svc.recall_detailed(QUERY, k=3)
        assert len(res.hits) == 3 and not res.rerank.ok
        assert "COHERE_API_KEY" in res.rerank.error and "recall.rerank.api_key" in res.rerank.error
        assert not server.requests
    finally:
        svc.close()


def test_what_the_owner_forgot_never_reaches_the_reranker(tmp_path, embedder, server) -> None:
    root = tmp_path / "ws"
    make_workspace(
        root,
        memory="# Family\n- Sister Lena lives in Porto\n- Lena is a marine biologist\n",
        history="## 2026-03-02 18:00\nMaya said her sister Lena moved to Porto. They planned a hike in the Jura.\n",
    )
    rerank = {"kind": "provider", "model": "infinity/bge", "api_base": server.base}
    cfg = Config(workspace=root, recall={"rerank": rerank})
    svc = MemoryService(Workspace(root), cfg, embedder=embedder)
    try:
        porto = next(u for u in svc.facts() if "Porto" in u.text)
        svc.forget([porto.id])
        res = svc.recall_detailed("Lena Porto hike Jura", k=5)
        assert res.rerank.ok and res.hits
        sent = server.requests[-1]["documents"]
        assert sent and not any("Porto" in d for d in sent), sent
        assert any("hike in the Jura" in d for d in sent)
        assert not any("Porto" in h.unit.text for h in res.hits)
    finally:
        svc.close()
