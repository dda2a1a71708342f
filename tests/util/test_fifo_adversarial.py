"""A FIFO where memclaw reads a file (planted by hand, or by the owner's model through `exec mkfifo`) never hangs
a command: every file is opened non-blocking and checked to be a regular file (memclaw.util.safepath.open_regular),
so the command says so in one line and exits 3. The console script runs in a child process with a bound on the
wait: a hang is a failed test, not a hung suite."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

MEMORY = "# Family\n- My sister Lena lives in Porto\n- I work at Solaris Energy\n"
HISTORY = "[2026-03-02 18:10] Talked about the trip to Porto in April.\n"
WAIT_S = 120
"""Far beyond what any of these commands needs; a FIFO read would wait forever."""


def _memclaw(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("memclaw")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "memclaw.cli.main"]
    env = {
        **os.environ,
        "MEMCLAW_HOME": str(home),
        "COLUMNS": "400",
        "MEMCLAW_AGENT__MODEL": "openai/gpt-4o-mini",
        "MEMCLAW_AGENT__MAX_RETRIES": "0",
        # (never reached: the session is read first; a closed port if it were)
        "OPENAI_API_BASE": "http://127.0.0.1:9/v1",
        "OPENAI_API_KEY": "sk-test",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    try:
        return subprocess.run([*cmd, *args], env=env, capture_output=True, text=True, timeout=WAIT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"`memclaw {' '.join(args)}` hung on a FIFO (killed after {WAIT_S} s): {e.stderr!r}")


@pytest.fixture(scope="module")
def synced(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("fifo") / "home"
    home.mkdir()
    assert _memclaw(home, "onboard").returncode == 0
    mem = home / "workspace" / "memory"
    (mem / "MEMORY.md").write_text(MEMORY, "utf-8")
    (mem / "HISTORY.md").write_text(HISTORY, "utf-8")
    r = _memclaw(home, "memory", "sync")
    assert r.returncode == 0, r.stderr
    return home


@pytest.fixture
def home(synced: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "home"
    shutil.copytree(synced, copy, symlinks=True)
    return copy


def _plant(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _one_line_exit_3(r: subprocess.CompletedProcess[str], fifo: Path) -> None:
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert fifo.name in lines[0] and "FIFO" in lines[0], lines[0]


@pytest.mark.parametrize(
    ("rel", "args"),
    [
        (".memclaw-index/manifest.json", ("recall", "where does my sister live", "--json")),
        ("memory/HISTORY.md", ("recall", "where does my sister live", "--json")),
        ("memory/archive/2026-03-02.md", ("recall", "where does my sister live", "--json")),
        ("USER.md", ("context", "hello")),
        ("skills/x/SKILL.md", ("context", "hello")),
        ("sessions/cli__cli.jsonl", ("agent", "-m", "hello")),
    ],
)
def test_a_fifo_is_refused_in_one_line_not_waited_on(home: Path, rel: str, args: tuple[str, ...]) -> None:
    fifo = home / "workspace" / rel
    _plant(fifo)
    _one_line_exit_3(_memclaw(home, *args), fifo)


def test_a_forget_refused_by_a_fifo_leaves_the_fact(home: Path) -> None:
    mem = home / "workspace" / "memory" / "MEMORY.md"
    before = mem.read_bytes()
    fifo = home / "workspace" / "sessions" / "forgotten.jsonl"
    # the id first: `memory list` reads the record of forgotten memories too, and refuses the FIFO as well
    listed = _memclaw(home, "memory", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    fact_id = next(u["id"] for u in json.loads(listed.stdout) if "Lena" in u["text"])
    _plant(fifo)
    r = _memclaw(home, "memory", "forget", fact_id)
    _one_line_exit_3(r, fifo)
    assert mem.read_bytes() == before
