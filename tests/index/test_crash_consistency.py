"""Crash consistency: a process consolidating memory and syncing the index is SIGKILLed at random points.

The worker (tests/crash_child.py) runs the real Consolidator (real LLMClient over real HTTP against a
ScriptedLLMServer whose replies are consolidation JSON: a history entry plus add/update/delete fact ops) and, now
and then, MemoryService.add_fact, on one workspace with two scopes (the owner and an outside sender), with the real
bundled model and the embedded Chroma. It prints "BEGIN <op>" before each write and "ACK <op>" after the memclaw
call returned. The test kills it with SIGKILL after a seeded random delay, RUNS times on the same workspace; after
each kill it restarts (a fresh MemoryService, `sync()`) and checks:

* every ACKed write is in the Markdown, exactly: the facts of each scope equal the ACKed model, or the ACKed model
  plus the one write that was in flight (all of its fact ops or none: apply_fact_ops is atomic), and the history
  entries equal the ACKed ones, plus possibly the in-flight entry (only if its facts landed: facts come first);
* the Markdown parses, is valid UTF-8, ends with a newline, and has no line the worker could not have written;
* the index equals the Markdown: Chroma's ids and documents (store.texts) equal the units' passages, the BM25
  index and the unit table hold exactly the units' ids, and no scope is left DIRTY;
* the session files the worker wrote load without a corrupt or torn line;
* the archive holds every consolidated turn exactly once, in its sender's scope: a turn is in the archive once, or
  still in its session waiting to be consolidated (killed between the two, briefly both: the next consolidation of
  that session finishes the chunk without writing it again); a trimmed session's turns are all archived; an archived
  chunk carries the consolidation id of its history entry.

Each worker first finishes the consolidations a killed one left (crash_child.py: as the agent does at a session's
next consolidation); the test then expects the in-flight write whole. After the last kill, one more worker does only
that, and then every turn is in the archive exactly once and no session holds any.

Fifty kills would need fifty interpreters, and importing litellm alone takes ~7 s here, so crash_child.py is a fork
server: it imports everything and loads the model once, then forks one worker per run (the worker is what is killed).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import memclaw.index._scope_state as scope_state
from memclaw.agent.sessions import SessionStore
from memclaw.config import Config
from memclaw.index.passages import unit_vectors
from memclaw.index.scopes import index_text
from memclaw.markdown.archive import parse_day
from memclaw.markdown.files import read_units
from memclaw.markdown.units import OWNER_SCOPE, sender_scope
from memclaw.service.facade import MemoryService
from memclaw.service.learned import bare_fact
from memclaw.store.clients import release_embedded
from memclaw.workspace import Workspace
from tests.crash_child import OUTSIDER_ID, plans_dir, reply_text, user_text

pytestmark = pytest.mark.slow

RUNS = int(os.environ.get("CRASH_TEST_RUNS", "50"))
SEED = int(os.environ.get("CRASH_TEST_SEED", "20260707"))
REPO = Path(__file__).resolve().parents[2]

MEMORY = """# About me
- I live at 14 Rue des Lilas, Lyon
- I am allergic to penicillin

# Work
- I work at Solaris Energy as a battery engineer
"""
HISTORY = "[2026-03-02 18:10] Talked about the garden: tomatoes and basil on the balcony.\n"


class ForkServer:
    """tests/crash_child.py as a subprocess, with its stdout read by a thread (so a kill never blocks the test)."""

    def __init__(self, log_path: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1", ANONYMIZED_TELEMETRY="False")
        env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        env.setdefault("HF_HUB_OFFLINE", "1")
        self.log_path = log_path
        self._log = open(log_path, "w")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.crash_child"],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.write_s = 0.3  # running estimate of one write's duration (BEGIN -> ACK), seconds
        threading.Thread(target=self._read, daemon=True).start()
        first = self.next_line(120)
        assert first == "READY", f"crash child did not start: {first!r}; see {log_path}"

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self, timeout: float) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"crash child silent for {timeout} s; see {self.log_path}") from None
        if line is None:
            raise AssertionError(f"crash child exited ({self.proc.wait()}); see {self.log_path}")
        return line

    def run(
        self, root: Path, seed: int, run: int, begins: int, frac: float, *, resume_only: bool = False
    ) -> list[tuple[str, dict[str, Any]]]:
        """Start a worker; SIGKILL it `frac` x (a typical write's duration) after its `begins`-th BEGIN (counting
        from its start when `begins` is 0). Timing by the worker's own progress, not the clock, keeps the kills
        inside writes however loaded the machine is. `resume_only`: the worker only finishes what killed ones left,
        and is not killed. Returns what the worker printed."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"RUN {root} {seed} {run}{' resume' if resume_only else ''}\n")
        self.proc.stdin.flush()
        head = self.next_line(60)
        assert head.startswith("PID "), head
        pid = int(head.split()[1])
        events: list[tuple[str, dict[str, Any]]] = []
        seen = 0
        began = time.monotonic()

        def take(line: str) -> bool:
            nonlocal seen, began
            if line.startswith("DONE "):
                return True
            kind, _, body = line.partition(" ")
            events.append((kind, json.loads(body) if body else {}))
            if kind == "BEGIN":
                seen += 1
                began = time.monotonic()
            elif kind == "ACK":
                self.write_s = 0.8 * self.write_s + 0.2 * (time.monotonic() - began)
            return False

        finished = False
        if resume_only:
            begins = 10**9
        while seen < begins and not finished:
            finished = take(self.next_line(120))
        if not finished:
            deadline = time.monotonic() + frac * (self.write_s if begins else 0.5)
            while not finished and (left := deadline - time.monotonic()) > 0:
                try:
                    line = self.lines.get(timeout=left)
                except queue.Empty:
                    break
                if line is None:
                    raise AssertionError(f"crash child exited; see {self.log_path}")
                finished = take(line)
            with contextlib.suppress(ProcessLookupError):  # it may have finished on its own
                os.kill(pid, signal.SIGKILL)
        while not finished:
            finished = take(self.next_line(120))
        return events

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("QUIT\n")
                self.proc.stdin.flush()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


@dataclass
class ScopeModel:
    facts: Counter = field(default_factory=Counter)
    history: list[str] = field(default_factory=list)


def apply_op(m: ScopeModel, op: dict[str, Any], *, facts: bool = True, history: bool = True) -> ScopeModel:
    out = ScopeModel(Counter(m.facts), list(m.history))
    if facts:
        for t in op["delete"]:
            assert out.facts[t] > 0, f"the worker deleted a fact the model does not have: {t!r}"
            out.facts[t] -= 1
        for old, new in op["update"]:
            assert out.facts[old] > 0, f"the worker updated a fact the model does not have: {old!r}"
            out.facts[old] -= 1
            out.facts[new] += 1
        for t in op["add"]:
            out.facts[t] += 1
        out.facts = +out.facts
    if history and op["history"]:
        out.history.append(op["history"])
    return out


def read_scope(ws: Workspace, scope: str) -> tuple[ScopeModel, list, list]:
    """The scope's Markdown as a model, after checking the files end cleanly and contain only writable lines."""
    mem, hist = ws.memory_file(scope), ws.history_file(scope)
    facts = read_units(mem, scope=scope, kind="fact", source=ws.source_of(mem))
    entries = read_units(hist, scope=scope, kind="history", source=ws.source_of(hist))
    for path in (mem, hist):
        if path.exists():
            raw = path.read_bytes()
            raw.decode("utf-8")  # strict: a torn multi-byte character would fail here
            assert not raw or raw.endswith(b"\n"), f"{path} ends mid-line: {raw[-80:]!r}"
    if mem.exists():
        known = {f.text for f in facts}
        for n, line in enumerate(mem.read_text("utf-8").splitlines(), 1):
            ok = not line.strip() or line.startswith("#") or (line.startswith("- ") and line[2:] in known)
            assert ok, f"{mem}:{n} is not a line memclaw writes: {line!r}"
    if hist.exists():
        for n, line in enumerate(hist.read_text("utf-8").splitlines(), 1):
            assert not line.strip() or line.startswith("[20"), f"{hist}:{n} is half an entry: {line!r}"
    model = ScopeModel(Counter(bare_fact(f.text) for f in facts), [e.text for e in entries])
    return model, facts, entries


def archived(ws: Workspace, scopes: list[str]) -> tuple[Counter, dict[tuple[str, str], set[str]]]:
    """Every archived turn as (scope, text) -> how many times, and (scope, text) -> the ids of its chunks; each day
    file checked to end cleanly."""
    counts: Counter = Counter()
    cids: dict[tuple[str, str], set[str]] = {}
    for scope in scopes:
        for path in ws.archive_files(scope):
            raw = path.read_bytes()
            assert raw.endswith(b"\n"), f"{path} ends mid-line: {raw[-80:]!r}"
            for chunk in parse_day(raw.decode("utf-8")).chunks:
                for t in chunk.turns:
                    counts[(scope, t.text)] += 1
                    cids.setdefault((scope, t.text), set()).add(chunk.cid)
    return counts, cids


def check_archive(ws: Workspace, scopes: list[str], acked: set[str], *, final: bool = False) -> int:
    """Each consolidation's two turns (see the module docstring): in the archive exactly once, in its scope, or still
    in their session; all archived, and every session empty, when `final`. Returns how many are archived."""
    counts, cids = archived(ws, scopes)
    entries = {s: {e.text: e.extra.get("cid") for e in read_scope(ws, s)[2]} for s in scopes}
    store = SessionStore(ws.sessions_dir)
    done = 0
    for plan_file in sorted(plans_dir(ws.root).glob("*.json")):
        plan = json.loads(plan_file.read_text("utf-8"))
        tag, scope = plan["payload"]["tag"], plan["payload"]["scope"]
        turns = [user_text(tag), reply_text(tag)]
        n = {counts[(scope, t)] for t in turns}
        assert len(n) == 1 and n <= {0, 1}, f"{tag}: its turns are archived {[counts[(scope, t)] for t in turns]} times"
        others = [s for s in scopes if s != scope and any(counts[(s, t)] for t in turns)]
        assert not others, f"{tag}: turns of scope {scope} archived in {others}"
        session = store.load("cli", f"crash-{tag}")
        waiting = [m["content"] for m in session.unconsolidated]
        if n == {1}:
            done += 1
            (cid,) = cids[(scope, turns[0])]
            hist = plan["payload"]["history"]
            assert entries[scope].get(hist, cid) == cid, f"{tag}: the chunk's id is not its history entry's"
        elif "trimmed_at" in session.meta:
            raise AssertionError(f"{tag}: its session was trimmed but its turns are not in the archive: lost")
        else:
            assert waiting in ([], turns) and session.last_consolidated == 0, f"{tag}: unexpected session {waiting}"
            assert tag not in acked, f"{tag}: acknowledged but not archived"
        if final or tag in acked:
            assert not waiting, f"{tag}: its turns are still in the session after it was consolidated"
            assert n == {1} or not session.messages, f"{tag}: never archived"
    return done


def check_index(svc: MemoryService, scope: str) -> None:
    units = svc.parse_scope(scope)  # every unit the Markdown holds (archived turns too, once the index reads them)
    want: dict[str, str] = {}
    for u in units:
        want.update(unit_vectors(u.id, index_text(u)))
    got = svc.store.texts(scope)
    assert got == want, (
        f"Chroma differs from the Markdown in {scope}: missing {sorted(set(want) - set(got))[:5]}, "
        f"extra {sorted(set(got) - set(want))[:5]}, changed "
        f"{[i for i in set(want) & set(got) if want[i] != got[i]][:5]}"
    )
    ids = {u.id for u in units}
    loaded = scope_state.load(svc.layout.state_file(scope))
    assert loaded is not None or not ids, f"{scope} has no saved state"
    bm25_ids = loaded.lexical.ids() if loaded is not None and loaded.lexical is not None else set()
    assert bm25_ids == ids, f"BM25 differs from the Markdown in {scope}"
    saved = set(loaded.state.units) if loaded is not None else set()
    assert saved == ids, f"the saved unit table differs from the Markdown in {scope}"
    assert not svc.layout.dirty_file(scope).exists(), f"{scope} left DIRTY after sync"


def test_sigkill_during_consolidation_and_sync_loses_nothing(tmp_path, embedder) -> None:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text(MEMORY, "utf-8")
    (root / "memory" / "HISTORY.md").write_text(HISTORY, "utf-8")
    ws = Workspace(root)
    cfg = Config(workspace=root)
    scopes = [OWNER_SCOPE, sender_scope(OUTSIDER_ID)]
    model = {s: read_scope(ws, s)[0] for s in scopes}
    rng = random.Random(SEED)
    server = ForkServer(tmp_path / "crash-child.log")
    acked = in_flight_landed = in_flight_lost = resumed = 0
    bases: dict[str, ScopeModel] = {}  # tag -> its scope as it was before that consolidation began (until ACKed)
    acked_tags: set[str] = set()

    def replay(events: list[tuple[str, dict[str, Any]]], run: int) -> dict[str, Any] | None:
        nonlocal acked, resumed
        fails = [p for k, p in events if k == "FAIL"]
        assert not fails, f"run {run}: the worker failed: {fails[0]}; see {server.log_path}"
        pending: dict[str, Any] | None = None
        for kind, payload in events:
            if kind == "BEGIN":
                pending = payload
                if payload["tag"] is not None:
                    resumed += payload["tag"] in bases
                    bases.setdefault(payload["tag"], model[payload["scope"]])
            elif kind == "ACK":
                assert payload == pending, f"run {run}: ACK without its BEGIN"
                base = bases.pop(payload["tag"], None) if payload["tag"] is not None else None
                model[payload["scope"]] = apply_op(base or model[payload["scope"]], payload)
                if payload["tag"] is not None:
                    acked_tags.add(payload["tag"])
                pending = None
                acked += 1
        return pending

    def restart_check(run: int, pending: dict[str, Any] | None, *, final: bool = False) -> None:
        nonlocal in_flight_landed, in_flight_lost
        # A fresh service syncs; then the Markdown must hold every ACKed write, the index must equal it.
        svc = MemoryService(ws, cfg, embedder=embedder)
        svc.sync()
        for scope in scopes:
            actual = read_scope(ws, scope)[0]
            before = model[scope]
            allowed = [before]
            if pending is not None and pending["scope"] == scope:
                base = bases.get(pending["tag"], before) if pending["tag"] is not None else before
                allowed = [before, apply_op(base, pending, history=False), apply_op(base, pending)]
            assert actual in allowed, (
                f"run {run}, scope {scope}: the Markdown is none of the states the ACKed writes allow.\n"
                f"lost: facts {sorted((before.facts - actual.facts).elements())[:5]}, "
                f"history {[h for h in before.history if h not in actual.history][:5]}\n"
                f"unexpected: facts {sorted((actual.facts - before.facts).elements())[:5]}, "
                f"history {[h for h in actual.history if h not in before.history][:5]}\n"
                f"in flight: {pending}"
            )
            if pending is not None and pending["scope"] == scope:
                if actual == before:
                    in_flight_lost += 1
                else:
                    in_flight_landed += 1
            model[scope] = actual
            check_index(svc, scope)
        store = SessionStore(ws.sessions_dir)
        for channel, chat_id in store.list():
            if chat_id.startswith(f"crash-r{run}s"):
                s = store.load(channel, chat_id)
                assert not s.warnings, f"run {run}: session {chat_id}: {s.warnings}"
        check_archive(ws, scopes, acked_tags, final=final)
        svc.close()
        release_embedded(svc.layout.chroma_dir)  # the next worker writes the store from another process

    try:
        for run in range(RUNS):
            begins = rng.choice([0, 1, 1, 2, 2, 3])
            events = server.run(root, rng.randrange(2**31), run, begins, rng.uniform(0.0, 1.2))
            restart_check(run, replay(events, run))
        # One more worker, not killed, finishes what the last kill left: then every turn is archived, once.
        events = server.run(root, 0, RUNS, 0, 0.0, resume_only=True)
        assert replay(events, RUNS) is None, "the resuming worker left a write unfinished"
        restart_check(RUNS, None, final=True)
    finally:
        server.close()
    archived_chunks = check_archive(ws, scopes, acked_tags, final=True)
    print(
        f"{RUNS} kills: {acked} writes acknowledged ({resumed} finished by a later worker); in flight at the kill: "
        f"{in_flight_landed} landed whole or in part, {in_flight_lost} not at all; {archived_chunks} conversations "
        "archived, each exactly once"
    )
    assert acked >= RUNS // 3, "the workers hardly wrote anything before being killed: the test proves little"
    assert in_flight_landed + in_flight_lost >= RUNS // 4, "too few kills landed in the middle of a write"
    assert archived_chunks >= RUNS // 3, "hardly any conversation was archived: the test proves little"

    # The restarted memory answers from what survived.
    svc = MemoryService(ws, cfg, embedder=embedder)
    last = next(iter(model[OWNER_SCOPE].facts))
    assert last in [bare_fact(h.unit.text) for h in svc.recall(last, k=3)]
    svc.close()
