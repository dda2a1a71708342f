"""The index knows what it was built with: the store (13.1), the workspace rather than its path (13.13), the
model. A rebuild is announced in one line saying why and how many memories it embeds."""

from __future__ import annotations

import logging
import shutil

from memclaw.config import Config
from memclaw.index import layout as ix
from memclaw.service.facade import MemoryService
from memclaw.store.clients import release_embedded
from tests.service.test_memory_service import make_workspace

QUESTION = "Which company do I work for?"


def _service(ws, embedder, url: str | None = None) -> MemoryService:
    cfg = Config(workspace=ws.root)
    cfg.memory.chroma_url = url
    return MemoryService(ws, cfg, embedder=embedder)


def _rebuild_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("rebuilding the index")]


def _recall_with_vectors(svc: MemoryService) -> None:
    res = svc.recall_detailed(QUESTION, k=1)
    assert "Solaris" in res.hits[0].unit.text
    assert res.hits[0].vector.rank is not None, "the hit has no vector signal (BM25 only)"


def test_switching_store_is_noticed_said_once_and_synced(tmp_path, embedder, chroma_server, caplog):
    ws = make_workspace(tmp_path / "ws")
    server = _service(ws, embedder, chroma_server.url)
    server.sync()
    server.close()

    local = _service(ws, embedder)  # MEMCLAW_MEMORY__CHROMA_URL unset
    stats = local.stats()
    assert stats["rebuild"] == f"the store changed (server {chroma_server.url} -> embedded)"
    assert stats["scopes"]["owner"]["fresh"] is False
    caplog.set_level(logging.WARNING, logger="memclaw.index.identity")
    _recall_with_vectors(local)
    assert _rebuild_lines(caplog) == [
        f"rebuilding the index: the store changed (server {chroma_server.url} -> embedded); 7 memories to embed"
    ]
    assert local.stats()["rebuild"] is None and local.stats()["scopes"]["owner"]["fresh"] is True
    local.close()
    release_embedded(local.layout.chroma_dir)

    caplog.clear()
    back = _service(ws, embedder, chroma_server.url)  # and the reverse
    assert back.stats()["rebuild"] == f"the store changed (embedded -> server {chroma_server.url})"
    _recall_with_vectors(back)
    assert len(_rebuild_lines(caplog)) == 1
    assert ix.read_manifest(back.layout)["store"] == f"server {chroma_server.url}"
    back.close()


def test_a_moved_workspace_keeps_its_index(tmp_path, embedder):
    from memclaw.workspace import Workspace

    ws = make_workspace(tmp_path / "a")
    svc = _service(ws, embedder)
    svc.sync()
    namespace = svc.namespace
    svc.close()
    release_embedded(svc.layout.chroma_dir)

    shutil.move(tmp_path / "a", tmp_path / "b")
    ws_b = Workspace(tmp_path / "b")
    svc_b = _service(ws_b, embedder)
    assert svc_b.stats()["rebuild"] is None
    (report,) = svc_b.sync(["owner"])
    assert not report.rebuilt and report.added == 0 and report.updated == 0
    assert svc_b.namespace == namespace
    _recall_with_vectors(svc_b)
    assert ix.read_manifest(svc_b.layout)["workspace"] == str(ws_b.root.resolve())
    svc_b.close()


def test_a_copied_workspace_keeps_its_embedded_index(tmp_path, embedder):
    from memclaw.workspace import Workspace

    ws = make_workspace(tmp_path / "a")
    svc = _service(ws, embedder)
    svc.sync()
    svc.close()
    release_embedded(svc.layout.chroma_dir)
    shutil.copytree(tmp_path / "a", tmp_path / "copy")
    copy = _service(Workspace(tmp_path / "copy"), embedder)
    (report,) = copy.sync(["owner"])
    assert not report.rebuilt and report.added == 0
    _recall_with_vectors(copy)
    copy.close()


def test_a_copy_sharing_a_chroma_server_gets_its_own_vectors(tmp_path, embedder, chroma_server, caplog):
    from memclaw.workspace import Workspace

    ws = make_workspace(tmp_path / "a")
    original = _service(ws, embedder, chroma_server.url)
    original.sync()
    shutil.copytree(tmp_path / "a", tmp_path / "copy")
    copy = _service(Workspace(tmp_path / "copy"), embedder, chroma_server.url)
    caplog.set_level(logging.WARNING, logger="memclaw.index.identity")
    (report,) = copy.sync(["owner"])
    assert report.added == 7
    assert _rebuild_lines(caplog) == [
        "rebuilding the index: the workspace was copied (the copy gets its own vectors on the Chroma server); "
        "7 memories to embed"
    ]
    assert copy.namespace != original.namespace
    copy.add_fact("I work at Borealis Wind now")  # only in the copy
    assert not any("Borealis" in t for t in original.store.texts("owner"))
    _recall_with_vectors(original)
    original.close()
    copy.close()


def test_model_change_says_why_and_what_it_costs(tmp_path, embedder, caplog):
    from memclaw.config import EmbeddingsConfig
    from memclaw.embedding.load import load_embedder

    ws = make_workspace(tmp_path / "ws")
    hashed = load_embedder(EmbeddingsConfig(model="hash-test"))
    _service(ws, hashed).sync()
    caplog.set_level(logging.WARNING, logger="memclaw.index.identity")
    svc = _service(ws, embedder)
    (report,) = svc.sync(["owner"])
    assert report.rebuilt and report.added == 7
    assert _rebuild_lines(caplog) == [
        f"rebuilding the index: the embedding model changed ({hashed.fingerprint} -> {embedder.fingerprint}); "
        "7 memories to embed"
    ]
    assert ix.read_manifest(svc.layout)["dimensions"] == embedder.dim
    svc.sync(["owner"])
    assert len(_rebuild_lines(caplog)) == 1  # once
    svc.close()


def test_rebuild_reason_in_words():
    want = {"format": 1, "embedder": "m2", "tokenizer": "t", "store": "embedded"}
    assert ix.rebuild_reason(None, want) is None
    assert ix.rebuild_reason(dict(want, namespace="x"), want) is None
    assert ix.rebuild_reason(dict(want, tokenizer="t0"), want) == "the tokenizer changed"
    assert ix.rebuild_reason(dict(want, embedder="m1", store="server http://h:8000"), want) == (
        "the embedding model changed (m1 -> m2); the store changed (server http://h:8000 -> embedded)"
    )
    assert ix.store_id("http://h:8000/") == "server http://h:8000"
    # a manifest written before the setting existed was built with the agent's replies as passages
    assert ix.rebuild_reason(want, dict(want, agent_reply_vectors="passages")) is None
    assert ix.rebuild_reason(want, dict(want, agent_reply_vectors="head")) == (
        "how the agent's replies are embedded changed"
    )


def test_the_store_switch_of_the_issue_through_the_cli(tmp_path, chroma_server, monkeypatch, capsys, caplog):
    """13.1 as reported: `memory add` with MEMCLAW_MEMORY__CHROMA_URL set, then `stats` and `recall` without it."""
    import json

    from tests.service.test_faults import run_cli

    ws = make_workspace(tmp_path / "ws")
    monkeypatch.setenv("MEMCLAW_WORKSPACE", str(ws.root))
    monkeypatch.setenv("MEMCLAW_MEMORY__CHROMA_URL", chroma_server.url)
    code, _, err = run_cli(monkeypatch, capsys, "memory", "add", "I keep my passport in the blue folder")
    assert code == 0, err
    monkeypatch.delenv("MEMCLAW_MEMORY__CHROMA_URL")
    code, out, _ = run_cli(monkeypatch, capsys, "memory", "stats", "--json")
    stats = json.loads(out)
    assert stats["rebuild"] == f"the store changed (server {chroma_server.url} -> embedded)"
    assert stats["scopes"]["owner"]["fresh"] is False
    caplog.set_level(logging.WARNING, logger="memclaw.index.identity")  # the CLI's log lines go to stderr
    code, out, err = run_cli(monkeypatch, capsys, "recall", "where is my passport", "--json")
    assert code == 0
    hit = json.loads(out)[0]
    assert "passport" in hit["text"] and hit["vector"]["rank"] is not None
    assert _rebuild_lines(caplog) == [
        f"rebuilding the index: the store changed (server {chroma_server.url} -> embedded); 8 memories to embed"
    ]
    code, out, _ = run_cli(monkeypatch, capsys, "memory", "stats", "--json")
    assert json.loads(out)["rebuild"] is None and json.loads(out)["scopes"]["owner"]["fresh"] is True
