"""The workspace: paths and scopes (no escape from memory/), finding it, onboarding, and the demo."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memclaw.config import Config, load_config
from memclaw.errors import InvalidSenderError, MemoryFileError, WorkspaceError
from memclaw.markdown.files import read_units
from memclaw.markdown.units import sender_scope
from memclaw.workspace import (
    BOOTSTRAP_FILES,
    Workspace,
    build_demo_workspace,
    demo_queries,
    onboard,
    resolve_workspace,
)


def units(ws: Workspace, scope: str = "owner", kind: str = "fact"):
    path = ws.memory_file(scope) if kind == "fact" else ws.history_file(scope)
    return read_units(path, scope=scope, kind=kind, source=ws.source_of(path))


# ----- paths and scopes ----------------------------------------------------------------------------------
def test_paths(tmp_path):
    ws = Workspace(tmp_path)
    assert ws.memory_file("owner") == tmp_path / "memory" / "MEMORY.md"
    assert ws.history_file("owner") == tmp_path / "memory" / "HISTORY.md"
    assert ws.memory_file(sender_scope("discord:1234")) == tmp_path / "memory/people/discord%3A1234/MEMORY.md"
    assert ws.index_dir == tmp_path / ".memclaw-index"
    assert ws.skills_dir == tmp_path / "skills" and ws.sessions_dir == tmp_path / "sessions"
    assert ws.user_file == tmp_path / "USER.md"
    assert ws.source_of(ws.memory_file(sender_scope("a/b"))) == "memory/people/a%2Fb/MEMORY.md"
    assert Workspace(str(tmp_path)).root == tmp_path


@pytest.mark.parametrize("sender", ["../x", "a/b", "..", ".", "../../etc/passwd", "..\\..\\x", "%2e%2e", "/abs"])
def test_sender_ids_cannot_escape_the_people_folder(tmp_path, sender):
    ws = Workspace(tmp_path)
    people = (tmp_path / "memory" / "people").resolve()
    d = ws.memory_dir(sender_scope(sender))
    assert d.resolve().parent == people
    assert d.name not in (".", "..") and "/" not in d.name
    d.mkdir(parents=True)
    assert sender_scope(sender) in ws.scopes()


@pytest.mark.parametrize(
    "scope", ["people/", "people/" + "x" * 201, "people/a\x00b", "people/ x", "../etc", "Owner", ""]
)
def test_invalid_scopes_are_refused(tmp_path, scope):
    with pytest.raises(InvalidSenderError):
        Workspace(tmp_path).memory_file(scope)


def test_a_symlink_out_of_the_workspace_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    ws = Workspace(tmp_path / "ws")
    (ws.root / "memory" / "people").mkdir(parents=True)
    (ws.root / "memory" / "people" / "mallory").symlink_to(outside)
    with pytest.raises(MemoryFileError, match="mallory is a symlink"):
        ws.memory_file(sender_scope("mallory"))


def test_scopes_lists_owner_and_sender_folders(tmp_path):
    ws = Workspace(tmp_path)
    assert ws.scopes() == ["owner"]
    for sender in ("discord:2", "alice", "a b"):
        ws.memory_dir(sender_scope(sender)).mkdir(parents=True)
    (tmp_path / "memory" / "people" / "notes.txt").write_text("a file, not a scope")
    (tmp_path / "memory" / "people" / "discord:9").mkdir()  # hand-made, not percent-encoded: ignored
    (tmp_path / "memory" / "people" / ".hidden").mkdir()
    assert ws.scopes() == ["owner", "people/a b", "people/alice", "people/discord:2"]


def test_source_of_outside_path_is_an_error(tmp_path):
    with pytest.raises(WorkspaceError, match="not inside the workspace"):
        Workspace(tmp_path / "ws").source_of(tmp_path / "elsewhere.md")


# ----- resolve_workspace ---------------------------------------------------------------------------------
def _make_ws(root: Path) -> Path:
    (root / "memory").mkdir(parents=True)
    return root


def test_resolve_precedence(tmp_path, memclaw_home):
    default = _make_ws(memclaw_home / "workspace")
    configured = _make_ws(tmp_path / "configured")
    override = _make_ws(tmp_path / "override")
    assert resolve_workspace(Config()).root == default
    assert resolve_workspace(Config(workspace=configured)).root == configured
    assert resolve_workspace(Config(workspace=configured), override).root == override


def test_resolve_missing_or_not_a_workspace(tmp_path):
    with pytest.raises(WorkspaceError, match=r"no workspace at .*nowhere: run `memclaw onboard -w .*nowhere`"):
        resolve_workspace(Config(), tmp_path / "nowhere")
    (tmp_path / "plain").mkdir()
    with pytest.raises(WorkspaceError, match=r"no workspace at .*plain.*memclaw onboard"):
        resolve_workspace(Config(), tmp_path / "plain")
    (tmp_path / "file").write_text("x")  # (onboard would refuse it too: no advice that leads to another error)
    with pytest.raises(WorkspaceError, match=r"file.* is a file, not a workspace folder") as e:
        resolve_workspace(Config(), tmp_path / "file")
    assert "onboard" not in str(e.value)


def test_resolve_unreadable_workspace_names_the_path(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)  # ELOOP on every access, even for root
    with pytest.raises(WorkspaceError, match=str(loop)):
        resolve_workspace(Config(), loop)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read anything")
def test_resolve_permission_denied(tmp_path):  # pragma: no cover - CI runs as a normal user
    ws = _make_ws(tmp_path / "ws")
    os.chmod(ws / "memory", 0)
    try:
        with pytest.raises(WorkspaceError, match="cannot read workspace"):
            resolve_workspace(Config(), ws)
    finally:
        os.chmod(ws / "memory", 0o755)


# ----- onboard -------------------------------------------------------------------------------------------
def test_onboard_creates_config_and_workspace(memclaw_home):
    report = onboard(memclaw_home)
    ws_root = memclaw_home / "workspace"
    assert report.workspace == ws_root and report.config == memclaw_home / "config.toml"
    for rel in (*BOOTSTRAP_FILES, "memory/MEMORY.md", "memory/HISTORY.md"):
        assert (ws_root / rel).is_file() and (ws_root / rel) in report.created
        assert (ws_root / rel).read_text().strip()
    assert (ws_root / "skills").is_dir()
    assert load_config() == Config()  # the commented template validates as the defaults
    ws = resolve_workspace(load_config())
    assert units(ws) == [] and units(ws, kind="history") == []  # format help lives in comments
    assert (
        "<!--" in ws.memory_file("owner").read_text() and "[YYYY-MM-DD HH:MM]" in ws.history_file("owner").read_text()
    )


def test_onboard_with_workspace_sets_the_config_key(memclaw_home, tmp_path):
    target = tmp_path / 'my ws "quoted"'
    report = onboard(memclaw_home, target)
    assert report.workspace == target
    cfg = load_config()
    assert cfg.workspace == target
    assert resolve_workspace(cfg).root == target


def test_onboard_is_idempotent_and_never_overwrites(memclaw_home):
    onboard(memclaw_home)
    soul = memclaw_home / "workspace" / "SOUL.md"
    mem = memclaw_home / "workspace" / "memory" / "MEMORY.md"
    soul.write_text("my own soul\n")
    mem.write_text("- my own fact\n")
    (memclaw_home / "config.toml").write_text('[agent]\nmodel = "ollama/llama3"\n')
    (memclaw_home / "workspace" / "TOOLS.md").unlink()
    report = onboard(memclaw_home)
    assert soul.read_text() == "my own soul\n" and mem.read_text() == "- my own fact\n"
    assert load_config().agent.model == "ollama/llama3"
    assert report.created == [memclaw_home / "workspace" / "TOOLS.md"]
    assert soul in report.kept and mem in report.kept and memclaw_home / "config.toml" in report.kept


def test_onboard_keeps_an_existing_json_config(memclaw_home):
    (memclaw_home / "config.json").write_text('{"agent": {"model": "x/y"}}')
    report = onboard(memclaw_home)
    assert report.config == memclaw_home / "config.json" and not (memclaw_home / "config.toml").exists()


def test_onboard_refuses_a_file_as_workspace(memclaw_home, tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(WorkspaceError, match="not a folder"):
        onboard(memclaw_home, tmp_path / "f")


# ----- demo ----------------------------------------------------------------------------------------------
def test_demo_workspace(tmp_path):
    ws = build_demo_workspace(tmp_path / "demo")
    facts = units(ws)
    hist = units(ws, kind="history")
    assert 25 <= len(facts) <= 45
    top = {f.section.split(" > ")[0] for f in facts if f.section}
    assert {"Family", "Work", "Health", "Preferences", "Places"} <= top
    assert any(f.timestamp for f in facts)
    assert len(hist) >= 10 and all(h.timestamp for h in hist)
    assert (max(h.timestamp for h in hist) - min(h.timestamp for h in hist)).days > 90
    outsider = [s for s in ws.scopes() if s != "owner"]
    assert len(outsider) == 1 and len(units(ws, outsider[0])) == 3
    assert resolve_workspace(Config(), ws.root).root == ws.root
    assert demo_queries()


def test_demo_never_overwrites_memories(memclaw_home, tmp_path):
    report = onboard(memclaw_home)  # empty template files are replaced by the demo
    ws = build_demo_workspace(report.workspace)
    assert len(units(ws)) > 20
    ws.memory_file("owner").write_text("- mine\n")
    build_demo_workspace(report.workspace)
    assert ws.memory_file("owner").read_text() == "- mine\n"
