"""Two `memclaw agent -m` processes on the one CLI session ("cli", "cli") at once: one turn at a time per session.

The real console script in subprocesses, litellm over real HTTP to a scripted server that holds the first
process's answer until the second process says it is waiting for the session's turn lock (or, without the lock,
until its message is in the session). Each reply must land right after its own message, every message exactly once,
the second request must show the model the first turn whole; with consolidation (window 4) no user turn may be
archived without its reply. MEMCLAW_HOME is a temp dir for every test (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from memclaw.agent._turnlock import WAITING_NOTE
from memclaw.markdown.archive import parse_day
from tests.cli.test_agent_cli import memclaw
from tests.llm_server import Scripted, scripted_server

pytestmark = pytest.mark.slow

WAIT_S = 120.0  # an upper bound only: each wait ends as soon as its event happens
NOTE = WAITING_NOTE.split(" (")[0]
FIRST = "turn-03 charlie-A"
SECOND = "turn-04 delta-B"


@dataclass
class Gates:
    release_first: threading.Event = field(default_factory=threading.Event)
    first_asked: threading.Event = field(default_factory=threading.Event)


def answer(gates: Gates, req: dict[str, Any]) -> Scripted:
    messages = req.get("messages") or [{}]
    if "You write long-term memory as strict JSON" in str(messages[0].get("content")):
        entry = {"history_entry": "A consolidation.", "facts": []}
        return Scripted(message={"role": "assistant", "content": json.dumps(entry)})
    said = str(messages[-1]["content"])
    if said == FIRST:  # the slow model: held until the second process is waiting (or has its message on disk)
        gates.first_asked.set()
        gates.release_first.wait(WAIT_S)
    return Scripted(message={"role": "assistant", "content": f"reply to {said}"})


@pytest.fixture
def gated(monkeypatch):
    gates = Gates()
    with scripted_server(monkeypatch) as server:
        server.default = Scripted(fn=lambda req: answer(gates, req))
        yield gates, server


@dataclass
class Run:
    """A running `agent -m` process, its stderr read as it comes."""

    proc: subprocess.Popen[str]
    err: list[str] = field(default_factory=list)
    noted: threading.Event = field(default_factory=threading.Event)

    def read(self, stream: IO[str]) -> None:
        for line in stream:
            self.err.append(line)
            if NOTE in line:
                self.noted.set()


def start(root: Path, text: str, window: str) -> Run:
    env = dict(os.environ, MEMCLAW_AGENT__MODEL="openai/gpt-4o-mini", MEMCLAW_AGENT__MAX_RETRIES="0")
    env.update(MEMCLAW_AGENT__MEMORY_WINDOW=window, LITELLM_LOCAL_MODEL_COST_MAP="True", COLUMNS="200")
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    cmd = [sys.executable, "-m", "memclaw.cli.main", "agent", "-m", text, "-w", str(root)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run = Run(proc)
    threading.Thread(target=run.read, args=(proc.stderr,), daemon=True).start()
    return run


def finish(run: Run) -> str:
    out = run.proc.stdout.read() if run.proc.stdout else ""
    run.proc.wait(timeout=WAIT_S)
    assert run.proc.returncode == 0, "".join(run.err)
    return out.strip()


def session_messages(root: Path) -> list[dict[str, Any]]:
    path = root / "sessions" / "cli__cli.jsonl"
    records = [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]
    return [r for r in records if "_meta" not in r]


def archived(root: Path) -> list[str]:
    days = sorted((root / "memory" / "archive").glob("*.md"))
    return [t.text for p in days for c in parse_day(p.read_text("utf-8")).chunks for t in c.turns]


def two_turns_at_once(root: Path, gates: Gates, window: str) -> tuple[Run, Run]:
    """turn-01 and turn-02 in the session, then turn-03 (slow) and turn-04 started while turn-03 waits for the
    model; the model answers turn-03 once turn-04's process says it waits (or its message is on disk)."""
    (root / "memory").mkdir(parents=True)
    for text in ("turn-01 alpha", "turn-02 bravo"):
        p = memclaw("agent", "-m", text, "-w", str(root), MEMCLAW_AGENT__MEMORY_WINDOW=window)
        assert p.returncode == 0, p.stderr
    first = start(root, FIRST, window)
    assert gates.first_asked.wait(WAIT_S), "the first process never asked the model"
    second = start(root, SECOND, window)
    end = time.monotonic() + WAIT_S
    while not second.noted.wait(0.05):
        contents = [m.get("content") for m in session_messages(root)]
        assert time.monotonic() < end and second.proc.poll() is None, "".join(second.err)
        if SECOND in contents:  # no lock: the second turn went ahead (the bug); let the first finish
            break
    gates.release_first.set()
    return first, second


def assert_pairs_in_order(messages: list[dict[str, Any]]) -> None:
    """User/assistant pairs, each reply right after its own message."""
    roles = [m["role"] for m in messages]
    assert roles == ["user", "assistant"] * (len(messages) // 2), roles
    for user, reply in zip(messages[::2], messages[1::2], strict=True):
        assert reply["content"] == f"reply to {user['content']}", (user, reply)


SAID = ["turn-01 alpha", "turn-02 bravo", FIRST, SECOND]


def test_two_processes_on_one_session_take_turns(tmp_path, gated):
    gates, server = gated
    root = tmp_path / "ws"
    first, second = two_turns_at_once(root, gates, window="50")
    assert finish(first) == f"reply to {FIRST}"
    assert finish(second) == f"reply to {SECOND}"
    assert second.noted.is_set(), "".join(second.err)  # it said why it waited

    messages = session_messages(root)
    assert [m["content"] for m in messages[::2]] == SAID
    assert_pairs_in_order(messages)
    asked = next(r["messages"] for r in server.requests if r["messages"][-1]["content"] == SECOND)
    turns = [m["content"] for m in asked if m["role"] in ("user", "assistant")]
    seen = [t for t in turns if not str(t).startswith("[Runtime Context")]  # the model saw turn 3 whole, in order
    assert seen == [t for s in SAID[:3] for t in (s, f"reply to {s}")] + [SECOND], turns


def test_consolidating_never_archives_a_user_turn_without_its_reply(tmp_path, gated):
    gates, _ = gated
    root = tmp_path / "ws"
    first, second = two_turns_at_once(root, gates, window="4")
    assert finish(first) == f"reply to {FIRST}"
    assert finish(second) == f"reply to {SECOND}"

    messages, archive = session_messages(root), archived(root)
    assert_pairs_in_order(messages)
    for text in SAID:
        reply = f"reply to {text}"
        assert [m["content"] for m in messages].count(text) + archive.count(text) == 1, (text, messages, archive)
        assert [m["content"] for m in messages].count(reply) + archive.count(reply) == 1, (reply, messages, archive)
        if text in archive:  # archived with its reply, right after it
            assert archive[archive.index(text) + 1] == reply, archive
    assert archive, "nothing was consolidated"


def test_ctrl_c_while_waiting_for_the_turn_exits_130_and_changes_nothing(tmp_path, gated):
    import signal

    from memclaw.agent.sessions import TURN_SUFFIX
    from memclaw.util.files import file_lock

    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    p = memclaw("agent", "-m", "turn-01 alpha", "-w", str(root))
    assert p.returncode == 0, p.stderr
    before = (root / "sessions" / "cli__cli.jsonl").read_bytes()
    with file_lock(root / "sessions" / f"cli__cli.jsonl{TURN_SUFFIX}"):  # another turn of the session, in flight
        waiting = start(root, "turn-02 bravo", "50")
        assert waiting.noted.wait(WAIT_S), "".join(waiting.err)
        waiting.proc.send_signal(signal.SIGINT)
        waiting.proc.wait(timeout=WAIT_S)
    assert waiting.proc.returncode == 130, "".join(waiting.err)
    assert (root / "sessions" / "cli__cli.jsonl").read_bytes() == before
    p = memclaw("agent", "-m", "turn-02 bravo", "-w", str(root))  # and the session's turns go on
    assert p.returncode == 0 and p.stdout.strip() == "reply to turn-02 bravo", p.stderr
