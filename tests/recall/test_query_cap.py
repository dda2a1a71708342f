"""A recall query is cut to `recall.max_query_chars`, with a note: a hostile query of megabytes costs no more than
one of that length (each stage's work grows with the query). Real Markdown, the bundled model's test embedder,
embedded Chroma."""

from __future__ import annotations

from memclaw.config import Config
from memclaw.service.facade import MemoryService
from tests.service.test_memory_service import make_workspace


def test_a_long_query_is_cut_with_a_note(tmp_path, embedder) -> None:
    ws = make_workspace(tmp_path / "ws", memory="# Boats\n- My kayak is moored at the Quai Rambaud\n")
    cfg = Config(workspace=ws.root, recall={"max_query_chars": 40})
    svc = MemoryService(ws, cfg, embedder=embedder)
    try:
        query = "where is my kayak moored " + "last week [ " * 20_000
        for mode in ("hybrid", "bm25"):
            res = svc.recall_detailed(query, k=1, mode=mode)
            assert res.query == query[:40]
            assert any("cut to its first 40 characters (recall.max_query_chars)" in w for w in res.warnings)
            assert res.hits and "kayak" in res.hits[0].unit.text
        short = svc.recall_detailed("kayak moored", k=1)
        assert not any("max_query_chars" in w for w in short.warnings)
    finally:
        svc.close()
