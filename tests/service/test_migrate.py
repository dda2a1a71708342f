"""`memclaw memory migrate --to URL` (issue 7): the embedded index copied to a real Chroma server, vectors as they
are; afterwards `memory.chroma_url` set to that URL recalls the same memories without re-embedding anything."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memclaw.cli.main import run
from memclaw.config import Config
from memclaw.markdown.units import sender_scope
from memclaw.service.facade import MemoryService
from memclaw.workspace import Workspace

MEMORY = """# About me
- I live at 14 Rue des Lilas, Lyon
- My sister Lena lives in Porto and works as a marine biologist
- I am allergic to penicillin
"""
HISTORY = "[2026-03-02 18:10] Talked about the trip to Porto in April: flights with TAP, staying with Lena.\n"
OUTSIDER = sender_scope("discord:77")


def _workspace(root: Path) -> Workspace:
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text(MEMORY, "utf-8")
    (root / "memory" / "HISTORY.md").write_text(HISTORY, "utf-8")
    return Workspace(root)


def _cli(monkeypatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["memclaw", *args])
    try:
        run()
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 0
    return 0


def _snapshot(svc: MemoryService, query: str, scope: str) -> list[tuple[str, int | None]]:
    return [(h.unit.id, h.vector.rank) for h in svc.recall_detailed(query, scope=scope, k=5).hits]


def test_migrate_copies_vectors_and_server_mode_uses_them(tmp_path, monkeypatch, capsys, chroma_server, embedder):
    ws = _workspace(tmp_path / "ws")
    local = MemoryService(ws, Config(workspace=ws.root), embedder=embedder)
    local.add_fact("I ordered a blue teapot, order 5521", scope=OUTSIDER)
    before_owner = _snapshot(local, "where does my sister live", "owner")
    before_outsider = _snapshot(local, "teapot order", OUTSIDER)
    expected = {s: local.store.texts(s) for s in ("owner", OUTSIDER)}
    local.close()

    assert _cli(monkeypatch, "memory", "migrate", "--to", chroma_server.url, "--workspace", str(ws.root)) == 0
    assert "migrated 5 memories" in capsys.readouterr().out  # 3 facts + 1 history entry + the outsider's fact

    cfg = Config(workspace=ws.root)
    cfg.memory.chroma_url = chroma_server.url
    remote = MemoryService(ws, cfg, embedder=embedder)
    reports = remote.sync()
    assert all(not r.rebuilt and not r.changed for r in reports)  # the copy is used as it is: nothing re-embedded
    for scope, texts in expected.items():
        assert remote.store.texts(scope) == texts
    assert _snapshot(remote, "where does my sister live", "owner") == before_owner
    assert _snapshot(remote, "teapot order", OUTSIDER) == before_outsider
    assert "teapot" not in " ".join(h.unit.text for h in remote.recall("teapot order", k=10))  # scopes stay apart


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:1", "not a url"])
def test_migrate_to_a_bad_url_is_one_line_and_loses_nothing(tmp_path, monkeypatch, capsys, url, embedder):
    ws = _workspace(tmp_path / "ws")
    before = {p: p.read_bytes() for p in (ws.root / "memory").iterdir()}
    assert _cli(monkeypatch, "memory", "migrate", "--to", url, "--workspace", str(ws.root)) == 2  # usage
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("Error: --to") and "http(s) URL" in err[0]
    assert {p: p.read_bytes() for p in (ws.root / "memory").iterdir()} == before


def test_migrate_to_a_server_that_is_not_there_names_the_address_given(tmp_path, monkeypatch, capsys, embedder):
    """Exit 4, one line naming --to's address (not the config's memory.chroma_url), nothing lost."""
    ws = _workspace(tmp_path / "ws")
    before = {p: p.read_bytes() for p in (ws.root / "memory").iterdir()}
    url = "http://127.0.0.1:9"  # (the discard port: nothing listens)
    assert _cli(monkeypatch, "memory", "migrate", "--to", url, "--workspace", str(ws.root)) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"Error: the server at --to {url}") and "chroma_url" not in err[0]
    assert {p: p.read_bytes() for p in (ws.root / "memory").iterdir()} == before
