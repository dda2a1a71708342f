"""`memclaw agent -m` and `memclaw chat` end to end: the real console script in a subprocess, litellm over real HTTP
to the scripted server (OPENAI_API_BASE), the real MemoryService (bundled model, embedded Chroma), real sessions.
`memclaw chat` runs with TTY_COMPATIBLE=1 so rich treats stderr as a terminal and draws its spinner."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memclaw.sessions import SessionStore
from tests.llm_server import scripted_server

pytestmark = pytest.mark.slow

MEMORY = "# Work\n- I work at Solaris Energy as a battery engineer\n\n# Home\n- I live in Lyon\n"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


@pytest.fixture
def llm_server(monkeypatch):
    with scripted_server(monkeypatch) as s:
        yield s


@pytest.fixture
def root(tmp_path) -> Path:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text(MEMORY, "utf-8")
    return root


def memclaw(*args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)  # MEMCLAW_HOME (a temp dir) and OPENAI_API_BASE/KEY come from the fixtures
    full.update(
        MEMCLAW_AGENT__MODEL="openai/gpt-4o-mini",
        MEMCLAW_AGENT__MAX_RETRIES="0",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        COLUMNS="100",
    )
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "memclaw.cli.main", *args],
        input=stdin,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_agent_one_shot_through_the_console_script(root, llm_server):
    llm_server.reply("You work at Solaris Energy.")
    p = memclaw("agent", "-m", "where do I work?", "-w", str(root))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "You work at Solaris Energy."
    sent = llm_server.requests[0]
    assert sent["model"] == "gpt-4o-mini" and sent["messages"][-1]["content"] == "where do I work?"
    system = sent["messages"][0]["content"]
    assert "Solaris Energy" in system[system.index("<recalled-memories>") :]  # auto-recall over the owner's memory
    assert {t["function"]["name"] for t in sent["tools"]} >= {"exec", "read_file", "memory_search"}  # the owner
    session = SessionStore(root / "sessions").load("cli", "cli")
    assert [(m["role"], m["content"]) for m in session.messages] == [
        ("user", "where do I work?"),
        ("assistant", "You work at Solaris Energy."),
    ]
    # the model unavailable: one clear line, exit code 5, the message kept
    llm_server.status(500, times=3)
    p = memclaw("agent", "-m", "still there?", "-w", str(root))
    assert p.returncode == 5
    assert p.stdout == ""  # an error is never printed as if it were the reply
    line = p.stderr.strip()
    assert line.startswith("Error: the model openai/gpt-4o-mini is unavailable") and "\n" not in line
    session = SessionStore(root / "sessions").load("cli", "cli")
    assert session.messages[-1]["content"] == "still there?"
    # an empty message is a usage error naming the fix
    p = memclaw("agent", "-m", "  ", "-w", str(root))
    assert p.returncode == 2 and 'memclaw agent -m "your message"' in p.stderr


def test_chat_is_interactive_with_history_a_spinner_and_commands(root, llm_server):
    llm_server.reply("Hello! How can I help?")
    llm_server.reply("You work at Solaris Energy.")
    p = memclaw(
        "chat",
        "-w",
        str(root),
        stdin="hello there\n\n/help\nwhere do I work?\nexit\n",
        TTY_COMPATIBLE="1",
        TTY_INTERACTIVE="1",
        NO_COLOR="1",
    )
    assert p.returncode == 0, p.stderr
    out, err = ANSI.sub("", p.stdout), ANSI.sub("", p.stderr)
    assert "Hello! How can I help?" in out and "You work at Solaris Energy." in out
    assert "/new" in out and "/recall" in out  # /help, answered without the model
    assert out.index("Hello!") < out.index("/recall") < out.index("Solaris")
    assert "/help for commands" in err and "thinking..." in err  # the banner and the spinner on stderr
    assert len(llm_server.requests) == 2
    second = llm_server.requests[1]["messages"]
    assert [m["content"] for m in second if m["role"] in ("user", "assistant")][:2] == [
        "hello there",
        "Hello! How can I help?",
    ]  # the conversation's history goes with the next message
    session = SessionStore(root / "sessions").load("cli", "cli")
    assert [m["content"] for m in session.messages] == [
        "hello there",
        "Hello! How can I help?",
        "where do I work?",
        "You work at Solaris Energy.",
    ]
    assert json.dumps(session.messages).count("/help") == 0  # commands are not stored


def test_a_missing_or_rejected_key_fails_at_once_naming_the_variable(root, llm_server, monkeypatch):
    # the server rejects the key (401): no retry, nothing on stdout, one line naming the variable
    llm_server.status(401, times=4)
    p = memclaw("agent", "-m", "hi", "-w", str(root), MEMCLAW_AGENT__MAX_RETRIES="3")
    assert (p.returncode, p.stdout) == (5, "")
    assert p.stderr.count("\n") == 1 and "rejected the API key" in p.stderr and "OPENAI_API_KEY" in p.stderr
    assert len(llm_server.requests) == 1
    # no key at all (litellm reports it as InternalServerError 500 "Missing credentials" for openai): no retry
    monkeypatch.delenv("OPENAI_API_KEY")
    p = memclaw("agent", "-m", "hi", "-w", str(root), MEMCLAW_AGENT__MAX_RETRIES="3")
    assert (p.returncode, p.stdout) == (5, "")
    assert p.stderr.startswith("Error: no API key for openai/gpt-4o-mini: set OPENAI_API_KEY") and (
        p.stderr.count("\n") == 1
    )
    assert len(llm_server.requests) == 1  # the call never left the process
    # a provider without api_base (litellm raises AuthenticationError): the provider's own variable
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    model = "anthropic/claude-3-5-sonnet-20241022"
    p = memclaw("agent", "-m", "hi", "-w", str(root), MEMCLAW_AGENT__MODEL=model, MEMCLAW_AGENT__MAX_RETRIES="3")
    assert (p.returncode, p.stdout) == (5, "")
    assert (
        p.stderr == f"Error: no API key for {model}: set ANTHROPIC_API_KEY in the environment "
        "(or agent.api_key in config.toml)\n"
    )
    # status and chat say so up front
    p = memclaw("status", "-w", str(root), MEMCLAW_AGENT__MODEL=model)
    assert p.returncode == 0 and "no API key for anthropic" in p.stdout and "ANTHROPIC_API_KEY" in p.stdout
    p = memclaw("status", "--json", "-w", str(root))
    assert "OPENAI_API_KEY" in json.loads(p.stdout)["model_key_missing"]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    p = memclaw("status", "--json", "-w", str(root))
    assert json.loads(p.stdout)["model_key_missing"] is None
    p = memclaw("chat", "-w", str(root), stdin="/exit\n", MEMCLAW_AGENT__MODEL=model)
    assert p.returncode == 0 and "no API key for anthropic" in p.stderr and "ANTHROPIC_API_KEY" in p.stderr
    assert len(llm_server.requests) == 1
