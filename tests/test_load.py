"""A crowd of senders under a low open-file limit (issue 39, items 5 and 6).

A child process lowers RLIMIT_NOFILE to 200, then drives 150 distinct outside senders' turns through the real
agent (tests/crowd_load.py: the bundled model, embedded Chroma, Markdown, sessions, litellm over HTTP to the
scripted server; each turn writes two facts with `remember`), then an owner turn. Before the fix every sender's
scope kept 4 Chroma segment files open for the life of the process, and turns failed with "Too many open files"
after a few dozen senders, the owner's included. Now every turn succeeds, the open files stay within a bound that
does not grow with the senders, and at most `memory.open_scopes` scopes stay loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
NOFILE = 200
SENDERS = 150
STEP = 25
OPEN_SCOPES = 16

CHILD = f"""
import asyncio, json, resource, sys
from pathlib import Path
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, ({NOFILE}, hard))
from memclaw.runtime import set_offline_env
set_offline_env()
from tests.crowd_load import CrowdRun, open_fds
from tests.llm_server import ScriptedLLMServer

server = ScriptedLLMServer().start()
run = CrowdRun.create(Path(sys.argv[1]), server, open_scopes={OPEN_SCOPES})

async def main():
    ok, text, _ = await run.owner_turn()
    print(json.dumps({{"start": open_fds(), "owner_ok": ok}}), flush=True)
    for a in range(0, {SENDERS}, {STEP}):
        await run.senders(a, a + {STEP})
        print(json.dumps({{"senders": a + {STEP}, "fds": open_fds(), "failures": run.failures[:3],
                          "loaded": len(run.memory.scopes.loaded())}}), flush=True)
    ok, text, _ = await run.owner_turn()
    facts = [run.facts_of(i) for i in range({SENDERS})]
    stored = sum(f"u{{i:06d}} likes green tea." in f for i, f in enumerate(facts))
    print(json.dumps({{"owner_ok": ok, "owner_reply": text, "stored": stored, "fds": open_fds()}}), flush=True)

asyncio.run(main())
server.stop()
"""


def test_150_senders_under_200_open_files_all_turns_succeed_and_files_stay_bounded(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "ws")], capture_output=True, text=True, env=env, cwd=ROOT
    )
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert proc.returncode == 0, proc.stderr[-3000:]
    start, *steps, end = lines
    assert start["owner_ok"]
    assert [s["failures"] for s in steps] == [[]] * (SENDERS // STEP), steps
    # open files: what the process had after its first owner turn, plus a margin that does not grow with senders
    # (sockets of litellm's and the scripted server's connections, a SQLite file open during a write)
    bound = start["start"] + 24
    assert max(s["fds"] for s in steps) <= bound, steps
    assert all(s["loaded"] <= OPEN_SCOPES for s in steps), steps
    assert end["owner_ok"], end
    assert end["stored"] == SENDERS  # every sender's two facts reached their own MEMORY.md
