"""Two `memclaw agent -m` processes on the one CLI session ("cli", "cli"), consolidating at the same time: the real
console script in subprocesses, litellm over real HTTP to a scripted server that holds the first consolidation's
answer until the second process has appended its turn (and, if it asks, until it has asked for its own
consolidation), and holds a second consolidation's answer until the first process is gone. Every turn must end up
in the session or in the archive exactly once, and each consolidation's history entry once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from memclaw.agent.sessions import SessionStore
from memclaw.markdown.archive import parse_day
from tests.cli.test_agent_cli import memclaw
from tests.llm_server import Scripted, scripted_server

pytestmark = pytest.mark.slow

WAIT_S = 120.0  # an upper bound only: each wait ends as soon as its event happens
GRACE_S = 3.0  # how long the second process may take from its turn on disk to asking for its consolidation


@dataclass
class Gates:
    """What the scripted server waits for, set by the test as the processes progress."""

    first_asked: threading.Event = field(default_factory=threading.Event)
    release_first: threading.Event = field(default_factory=threading.Event)
    first_gone: threading.Event = field(default_factory=threading.Event)
    consolidations: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def answer(gates: Gates, req: dict[str, Any]) -> Scripted:
    messages = req.get("messages") or [{}]
    if "You write long-term memory as strict JSON" not in str(messages[0].get("content")):  # a chat turn: echo it
        return Scripted(message={"role": "assistant", "content": f"reply to {messages[-1]['content']}"})
    with gates.lock:
        gates.consolidations += 1
        n = gates.consolidations
    if n == 1:  # the first process's: held until the second has its turn on disk (or asks too)
        gates.first_asked.set()
        gates.release_first.wait(WAIT_S)
    else:  # a later one: answered once the first process has trimmed and exited
        gates.release_first.set()
        gates.first_gone.wait(WAIT_S)
    entry = {"history_entry": f"Consolidation number {n}.", "facts": []}
    return Scripted(message={"role": "assistant", "content": json.dumps(entry)})


@pytest.fixture
def gated(monkeypatch):
    gates = Gates()
    with scripted_server(monkeypatch) as server:
        server.default = Scripted(fn=lambda req: answer(gates, req))
        yield gates


def start(root: Path, text: str) -> subprocess.Popen[str]:
    env = dict(os.environ, MEMCLAW_AGENT__MODEL="openai/gpt-4o-mini", MEMCLAW_AGENT__MAX_RETRIES="0")
    env.update(MEMCLAW_AGENT__MEMORY_WINDOW="4", LITELLM_LOCAL_MODEL_COST_MAP="True")
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    cmd = [sys.executable, "-m", "memclaw.cli.main", "agent", "-m", text, "-w", str(root)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(check: Any, timeout: float = WAIT_S) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def in_session(root: Path) -> list[str]:
    return [str(m.get("content")) for m in SessionStore(root / "sessions").load("cli", "cli").messages]


def archived(root: Path) -> list[str]:
    days = sorted((root / "memory" / "archive").glob("*.md"))
    return [t.text for p in days for c in parse_day(p.read_text("utf-8")).chunks for t in c.turns]


def test_two_processes_consolidating_one_session_lose_and_duplicate_nothing(tmp_path, gated):
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    for text in ("turn-01 alpha", "turn-02 bravo"):
        p = memclaw("agent", "-m", text, "-w", str(root), MEMCLAW_AGENT__MEMORY_WINDOW="4")
        assert p.returncode == 0, p.stderr
    first = start(root, "turn-03 charlie-A")
    assert gated.first_asked.wait(WAIT_S), "the first process never consolidated"
    second = start(root, "turn-04 delta-B")
    wait_for(lambda: "reply to turn-04 delta-B" in in_session(root) or second.poll() is not None)
    gated.release_first.wait(GRACE_S)  # the second process asking to consolidate releases the first at once
    gated.release_first.set()
    out_first = first.communicate(timeout=WAIT_S)
    gated.first_gone.set()
    out_second = second.communicate(timeout=WAIT_S)
    assert first.returncode == 0 and out_first[0].strip() == "reply to turn-03 charlie-A", out_first[1]
    assert second.returncode == 0 and out_second[0].strip() == "reply to turn-04 delta-B", out_second[1]

    said = [f"turn-0{i} {w}" for i, w in enumerate(("alpha", "bravo", "charlie-A", "delta-B"), 1)]
    session, archive = in_session(root), archived(root)
    for text in said + [f"reply to {t}" for t in said]:
        assert session.count(text) + archive.count(text) == 1, (text, session, archive)
    history = (root / "memory" / "HISTORY.md").read_text("utf-8")
    chunks = [c for p in (root / "memory" / "archive").glob("*.md") for c in parse_day(p.read_text("utf-8")).chunks]
    assert all(history.count(f"#{c.cid}]") == 1 for c in chunks), history
    assert len(chunks) == history.count("Consolidation number")
