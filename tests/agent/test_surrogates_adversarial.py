"""A lone surrogate cannot be encoded as UTF-8, so it used to fail the session write: a traceback, exit 5, the
message lost and an apology saying nothing was lost. Text is repaired (U+FFFD) where it enters: argv and stdin,
a channel's message and sender name, the model's reply and its tool arguments. The console script runs in a child
process; litellm talks real HTTP to the scripted server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memclaw.agent.sessions import SessionStore
from tests.llm_server import scripted_server

pytestmark = pytest.mark.slow


@pytest.fixture
def llm_server(monkeypatch):
    with scripted_server(monkeypatch) as s:
        yield s


@pytest.fixture
def root(tmp_path) -> Path:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text("# Home\n- I live in Lyon\n", "utf-8")
    return root


def _agent(root: Path, message: bytes) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "MEMCLAW_AGENT__MODEL": "openai/gpt-4o-mini",
        "MEMCLAW_AGENT__MAX_RETRIES": "0",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "COLUMNS": "100",
    }
    argv = [sys.executable.encode(), b"-m", b"memclaw.cli.main", b"agent", b"-m", message, b"-w", bytes(root)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)


def _clean(p: subprocess.CompletedProcess[str]) -> None:
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "Nothing was lost" not in p.stdout + p.stderr


def _saved(root: Path) -> list[tuple[str, str]]:
    session = SessionStore(root / "sessions").load("cli", "cli")
    return [(m["role"], m["content"]) for m in session.messages if m.get("content")]


def test_undecodable_argv_bytes_are_repaired_and_the_message_saved(root, llm_server):
    llm_server.reply("Noted.")
    p = _agent(root, b"bad \xed\xa0\x80")
    _clean(p)
    assert p.stdout.strip() == "Noted."
    assert llm_server.requests[0]["messages"][-1]["content"] == "bad \ufffd"
    assert _saved(root) == [("user", "bad \ufffd"), ("assistant", "Noted.")]


def test_a_lone_surrogate_in_the_models_reply_is_repaired(root, llm_server):
    llm_server.reply("half a pair: \ud800 there")
    p = _agent(root, b"hello")
    _clean(p)
    assert p.stdout.strip() == "half a pair: \ufffd there"
    assert _saved(root)[-1] == ("assistant", "half a pair: \ufffd there")


def test_a_lone_surrogate_in_write_file_content_is_repaired(root, llm_server):
    llm_server.tool_call("write_file", {"path": "notes.txt", "content": "odd \ud800 text"})
    llm_server.reply("Written.")
    p = _agent(root, b"write a note")
    _clean(p)
    assert p.stdout.strip() == "Written."
    assert (root / "notes.txt").read_text("utf-8") == "odd \ufffd text"
