"""Issue 18.2: a symlink never crosses scopes nor leaves the workspace. Each attack is a hostile workspace
(`ln -s .. memory/people/discord%3A6666`, MEMORY.md linked to a file outside, a linked HISTORY.md, people/ or lock
file, a link in the middle of the path) and each is refused: one line, exit 3, nothing read or written through the
link, the owner's memories nowhere in the output. Through the console script's entry point (in-process, as
test_bad_input does), the MemoryService, the agent's file tools and sessions; the Discord path is in
test_discord_gateway.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memclaw.config import Config
from memclaw.errors import MemoryFileError, SessionError
from tests.cli import test_bad_input
from tests.cli.test_bad_input import assert_error, user_files

cli, ws = test_bad_input.cli, test_bad_input.ws  # the in-process console script and an onboarded workspace

OWNER_FACT = "Porto"  # in the owner's MEMORY.md (tests.test_bad_input.MEMORY)
OUTSIDER = "discord:6666"
OUTSIDER_DIR = "discord%3A6666"
OUTSIDE_TEXT = "- outside-the-workspace secret: the vault code is 8841\n"


def snapshot(*paths: Path) -> dict[str, tuple[bool, bytes | None]]:
    """Per path: is it a symlink, and the bytes it holds (through the link), so that a link replaced by a file or a
    write through the link both show."""
    return {str(p): (p.is_symlink(), p.read_bytes() if p.is_file() else None) for p in paths}


def no_leak(r, *secrets: str) -> None:
    for s in secrets:
        assert s not in r.out and s not in r.err, s


@pytest.fixture
def outside(tmp_path) -> Path:
    """A file outside the workspace (another user's notes, a file in /etc...)."""
    f = tmp_path / "elsewhere" / "notes.md"
    f.parent.mkdir()
    f.write_text(OUTSIDE_TEXT)
    return f


# ----- a scope folder that is a symlink to the owner's folder ----------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["context", "where does my sister live", "--channel", "discord", "--sender", "6666"],
        ["context", "where does my sister live", "--sender", OUTSIDER, "--json"],
        ["recall", "sister Porto", "--sender", OUTSIDER],
        ["recall", "sister Porto", "--sender", OUTSIDER, "--json"],
        ["memory", "list", "--sender", OUTSIDER],
        ["memory", "list", "--sender", OUTSIDER, "--json"],
    ],
)
def test_scope_folder_linked_to_the_owner_is_refused_for_reading(cli, ws, memclaw_home, args):
    (ws / "memory" / "people").mkdir()
    link = ws / "memory" / "people" / OUTSIDER_DIR
    link.symlink_to("..")  # memory/people/discord%3A6666 -> memory/: the owner's folder
    before = user_files(memclaw_home)
    r = cli(*args)
    assert_error(r, 3, str(link), "is a symlink")
    no_leak(r, OWNER_FACT, "Lena")
    assert user_files(memclaw_home) == before


def test_scope_folder_linked_to_the_owner_is_refused_for_writing(cli, ws, memclaw_home):
    (ws / "memory" / "people").mkdir()
    link = ws / "memory" / "people" / OUTSIDER_DIR
    link.symlink_to("..")
    owner_files = [ws / "memory" / "MEMORY.md", ws / "memory" / "HISTORY.md"]
    before = snapshot(*owner_files)
    owner_id = json.loads(cli("memory", "list", "--json").out)[0]["id"]
    assert_error(cli("memory", "add", "I am the owner now", "--sender", OUTSIDER), 3, str(link))
    assert_error(cli("memory", "forget", owner_id, "--sender", OUTSIDER), 3, str(link))
    assert snapshot(*owner_files) == before
    assert link.is_symlink()
    # the owner's own commands are not blocked by it; a command over every scope names the link
    assert cli("recall", "sister").code == 0
    assert_error(cli("memory", "sync"), 3, str(link), "is a symlink")


# ----- MEMORY.md / HISTORY.md linked to a file outside the workspace ------------------------------------------------
@pytest.mark.parametrize("which", ["MEMORY.md", "HISTORY.md"])
@pytest.mark.parametrize(
    "args",
    [
        ["recall", "vault code"],
        ["recall", "vault code", "--json"],
        ["context", "what is the vault code", "--json"],
        ["memory", "list"],
        ["memory", "list", "--json"],
        ["memory", "sync"],
        ["memory", "stats", "--json"],
    ],
)
def test_owner_file_linked_outside_is_never_read(cli, ws, memclaw_home, outside, which, args):
    link = ws / "memory" / which
    link.unlink()
    link.symlink_to(outside)
    r = cli(*args)
    assert_error(r, 3, str(link), "is a symlink")
    no_leak(r, "vault", "8841")
    assert outside.read_text() == OUTSIDE_TEXT


@pytest.mark.parametrize("which", ["MEMORY.md", "HISTORY.md"])
def test_owner_file_linked_outside_is_never_written_nor_replaced(cli, ws, memclaw_home, outside, which):
    link = ws / "memory" / which
    link.unlink()
    link.symlink_to(outside)
    for args in (["memory", "add", "I moved to Faro"], ["memory", "forget", "f000000000000"]):
        r = cli(*args)
        assert_error(r, 3, str(link), "is a symlink")
        no_leak(r, "vault", "8841")
        assert link.is_symlink() and outside.read_text() == OUTSIDE_TEXT  # not replaced by a copy, not written


@pytest.mark.parametrize("which", ["MEMORY.md", "HISTORY.md"])
def test_onboard_refuses_a_workspace_whose_memory_file_is_a_link(cli, ws, memclaw_home, outside, which):
    """`onboard` does not call a workspace ready that every other command refuses: the same one line, exit 3, and
    nothing created, written or replaced (with --demo neither)."""
    link = ws / "memory" / which
    link.unlink()
    link.symlink_to(outside)
    before = user_files(memclaw_home)
    for args in (["onboard"], ["onboard", "--demo"], ["onboard", "-w", str(ws)]):
        r = cli(*args)
        assert_error(r, 3, str(link), "is a symlink")
        no_leak(r, "vault", "8841")
        assert link.is_symlink() and outside.read_text() == OUTSIDE_TEXT
        assert user_files(memclaw_home) == before
    link.unlink()
    assert cli("onboard").code == 0 and not link.is_symlink() and link.is_file()  # the link gone: ready again


@pytest.mark.parametrize("which", ["archive", "people", "archive/2026-11-20.md", ".MEMORY.md.lock"])
def test_onboard_refuses_any_link_the_other_commands_refuse(cli, ws, memclaw_home, tmp_path, which):
    """A linked archive, archive day, people/ or lock file: onboard says what recall and status say (exit 3), not
    "ready"."""
    target = tmp_path / "elsewhere"
    target.mkdir(exist_ok=True)
    if which.endswith((".md", ".lock")):
        target = target / "file.md"
        target.write_text("# 2026-11-20\n", "utf-8")
    link = ws / "memory" / which
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    assert_error(cli("onboard"), 3, "is a symlink")
    others = [cli(*args) for args in (["recall", "Porto"], ["status"], ["memory", "add", "I moved to Faro"])]
    assert any(r.code == 3 and "is a symlink" in r.err for r in others)  # what onboard said, another command says
    link.unlink()
    assert cli("onboard").code == 0


def test_history_append_through_a_link_is_refused(ws, outside, embedder):
    from datetime import datetime

    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    mem = MemoryService(Workspace(ws), Config(), embedder=embedder)
    link = ws / "memory" / "HISTORY.md"
    link.unlink()
    link.symlink_to(outside)
    with pytest.raises(MemoryFileError, match="is a symlink"):
        mem.append_history("owner", "We talked about the vault.", datetime(2026, 3, 3, 9, 0))
    # even past the workspace's check (a link put in place after it): O_NOFOLLOW refuses the open itself
    from memclaw.markdown.files import read_bytes
    from memclaw.markdown.history_file import append_history

    with pytest.raises(MemoryFileError, match="is a symlink"):
        append_history(link, datetime(2026, 3, 3, 9, 0), "We talked about the vault.")
    with pytest.raises(MemoryFileError, match="is a symlink"):
        read_bytes(link)
    assert outside.read_text() == OUTSIDE_TEXT
    mem.close()


def test_lock_file_linked_outside_is_refused(cli, ws, memclaw_home, outside):
    lock = ws / "memory" / ".MEMORY.md.lock"
    target = outside.parent / "created-through-the-lock"
    lock.symlink_to(target)
    assert_error(cli("memory", "add", "I moved to Faro"), 3, str(lock), "is a symlink")
    assert not target.exists()
    assert "Faro" not in (ws / "memory" / "MEMORY.md").read_text()


# ----- people/ linked, and a link in the middle of the path ----------------------------------------------------
@pytest.mark.parametrize("target", ["..", "elsewhere"])
def test_people_folder_that_is_a_link_is_refused(cli, ws, memclaw_home, tmp_path, target):
    if target == "..":
        (ws / "memory" / "people").symlink_to("..")  # people/ -> memory/
    else:  # people/ -> a folder outside holding a well-formed sender folder: a link in the middle of the path
        real = tmp_path / "other-people"
        (real / OUTSIDER_DIR).mkdir(parents=True)
        (real / OUTSIDER_DIR / "MEMORY.md").write_text(OUTSIDE_TEXT)
        (ws / "memory" / "people").symlink_to(real)
    link = ws / "memory" / "people"
    for args in (
        ["memory", "list", "--sender", OUTSIDER],
        ["recall", "vault code", "--sender", OUTSIDER],
        ["memory", "add", "hello", "--sender", OUTSIDER],
        ["memory", "sync"],
        ["memory", "stats"],
    ):
        r = cli(*args)
        assert_error(r, 3, str(link), "is a symlink")
        no_leak(r, "vault", "8841", OWNER_FACT)
    if target != "..":
        assert (tmp_path / "other-people" / OUTSIDER_DIR / "MEMORY.md").read_text() == OUTSIDE_TEXT


def test_a_file_linked_inside_a_real_scope_folder_is_refused(cli, ws, memclaw_home):
    """memory/people/discord%3A6666/ is a real folder, its MEMORY.md a link to the owner's: the last component."""
    d = ws / "memory" / "people" / OUTSIDER_DIR
    d.mkdir(parents=True)
    (d / "MEMORY.md").symlink_to(ws / "memory" / "MEMORY.md")
    for args in (["recall", "sister", "--sender", OUTSIDER], ["memory", "add", "x", "--sender", OUTSIDER]):
        r = cli(*args)
        assert_error(r, 3, str(d / "MEMORY.md"), "is a symlink")
        no_leak(r, OWNER_FACT, "Lena")


def test_the_workspace_and_memory_folder_themselves_may_be_links(cli, memclaw_home, tmp_path):
    """Keeping the workspace (or its memory/) on another disk is not an attack: every scope is below it alike."""
    real = tmp_path / "disk2" / "ws"
    from memclaw.workspace import create_workspace_files

    create_workspace_files(real)
    (real / "memory" / "MEMORY.md").write_text("- I keep bees\n")
    linked = tmp_path / "ws-link"
    linked.symlink_to(real)
    assert cli("memory", "add", "I grow garlic", "-w", str(linked), "--date", "2026-11-26").code == 0
    r = cli("recall", "bees garlic", "-w", str(linked), "--json")
    assert r.code == 0 and {"I keep bees", "I grow garlic (2026-11-26)"} <= {h["text"] for h in json.loads(r.out)}


# ----- the agent's file tools ------------------------------------------------------------------------------------
@pytest.fixture
def tool_ctx(ws):
    from memclaw.tools.base import ToolContext

    return ToolContext(root=ws, config=Config(), scope="owner", is_owner=True)


def run_tool(name: str, args: dict, ctx):
    import asyncio

    from memclaw.tools.registry import ToolRegistry

    return asyncio.run(ToolRegistry().execute(name, args, ctx))


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "memory/people/discord%3A6666/MEMORY.md"}),
        ("write_file", {"path": "memory/people/discord%3A6666/MEMORY.md", "content": "- hijacked\n"}),
        ("edit_file", {"path": "memory/people/discord%3A6666/MEMORY.md", "old_text": "Porto", "new_text": "Faro"}),
        ("list_dir", {"path": "memory/people/discord%3A6666"}),
        ("read_file", {"path": "notes-link.md"}),
        ("write_file", {"path": "notes-link.md", "content": "overwritten"}),
        ("edit_file", {"path": "notes-link.md", "old_text": "vault", "new_text": "safe"}),
    ],
)
def test_file_tools_never_follow_a_link(ws, tool_ctx, outside, tool, args):
    (ws / "memory" / "people").mkdir()
    (ws / "memory" / "people" / OUTSIDER_DIR).symlink_to("..")  # across scopes
    (ws / "notes-link.md").symlink_to(outside)  # out of the workspace
    before = snapshot(ws / "memory" / "MEMORY.md", outside, ws / "notes-link.md")
    r = run_tool(tool, args, tool_ctx)
    assert not r.ok and "symlink" in r.content, r.content
    assert OWNER_FACT not in r.content and "vault" not in r.content
    assert snapshot(ws / "memory" / "MEMORY.md", outside, ws / "notes-link.md") == before


def test_file_tools_refuse_a_link_made_after_the_check(ws, tool_ctx, outside, monkeypatch):
    """The race: the path is checked, then swapped for a link before the open; O_NOFOLLOW refuses the open."""
    import memclaw.tools.files as tools

    real = ws / "plain.md"
    real.write_text("plain")
    checked = tools.symlink_below

    def check_then_swap(path, base):
        out = checked(path, base)
        if Path(path) == ws.resolve() / "plain.md":
            real.unlink()
            real.symlink_to(outside)
        return out

    monkeypatch.setattr(tools, "symlink_below", check_then_swap)
    r = run_tool("read_file", {"path": "plain.md"}, tool_ctx)
    assert not r.ok and "vault" not in r.content
    r = run_tool("edit_file", {"path": "plain.md", "old_text": "vault", "new_text": "x"}, tool_ctx)
    assert not r.ok and outside.read_text() == OUTSIDE_TEXT


# ----- sessions ------------------------------------------------------------------------------------------------
def test_a_session_file_linked_to_another_chat_is_refused(tmp_path):
    from memclaw.agent.sessions import SessionStore

    store = SessionStore(tmp_path / "sessions")
    owner = store.load("cli", "cli")
    store.append(owner, {"role": "user", "content": "my bank PIN is 4931"})
    eve_path = store.path_for("discord", "777")
    eve_path.symlink_to(owner.path)  # Eve's session file -> the owner's conversation
    with pytest.raises(SessionError, match="is a symlink"):
        store.load("discord", "777")
    from memclaw.agent.sessions import Session

    eve = Session(channel="discord", chat_id="777", path=eve_path)
    with pytest.raises(SessionError, match="is a symlink"):
        store.append(eve, {"role": "user", "content": "hi"})
    with pytest.raises(SessionError, match="is a symlink"):
        store.clear(eve)
    assert "4931" in owner.path.read_text() and "hi" not in owner.path.read_text()
    assert eve_path.is_symlink()


def test_o_nofollow_is_available_here():
    """The checks above rely on O_NOFOLLOW on this platform (Linux, macOS); elsewhere safepath falls back to lstat."""
    from memclaw.util.safepath import O_NOFOLLOW

    assert O_NOFOLLOW == getattr(os, "O_NOFOLLOW", 0) != 0
