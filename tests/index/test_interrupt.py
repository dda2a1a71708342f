"""Ctrl-C during a rebuild (issue 19.6): one line says what it left, and the next command finishes it, visibly.

`memclaw memory reindex` runs as the console script in a child process with the real model; a real SIGINT arrives
once it has stored its first vectors. It exits 130 with one line on stderr; the vectors it stored are kept, so the
next `memclaw recall` embeds only the rest, showing its progress (plain lines: stderr is a pipe here), and answers
from an index that equals the Markdown.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memclaw.config import Config
from memclaw.index.passages import unit_vectors
from memclaw.index.scopes import index_text
from memclaw.markdown.files import read_units
from memclaw.service.facade import INTERRUPTED_SYNC, MemoryService
from memclaw.workspace import Workspace

pytestmark = pytest.mark.slow

N_FACTS = 5000  # two chunks of vectors (memclaw.index._vector_writer): the interrupt comes between them


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "MEMCLAW_HOME": str(home), "COLUMNS": "300"}


def _memclaw(home: Path, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "memclaw.cli.main", *args], env=_env(home), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw,
    )  # fmt: skip


def _vectors(home: Path) -> dict[str, str]:
    ws = Workspace(home / "workspace")
    svc = MemoryService(ws, Config(workspace=ws.root))
    try:
        return svc.store.texts("owner")
    finally:
        svc.close()


PROGRESS = ("embedding ", "reading ")


def test_sigint_during_reindex_says_what_it_left_and_the_next_recall_finishes_it(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    p = _memclaw(home, "onboard")
    assert p.wait(60) == 0
    mem = home / "workspace" / "memory" / "MEMORY.md"
    facts = [
        f"Fact {i}: Anna planted {i % 13} tomatoes near shed {i % 7} in the garden of house {i}" for i in range(N_FACTS)
    ]
    facts[4200] = "My sister Lena lives in Porto and works as a marine biologist"
    mem.write_text("# Garden\n" + "".join(f"- {f}\n" for f in facts), "utf-8")

    reindex = _memclaw(home, "memory", "reindex")
    scopes = home / "workspace" / ".memclaw-index" / "scopes"
    deadline = time.monotonic() + 600
    while not any(scopes.glob("*/DIRTY")):  # DIRTY: the first chunk of vectors is being written
        assert reindex.poll() is None, reindex.communicate()
        assert time.monotonic() < deadline, "the reindex never started writing"
        time.sleep(0.05)
    time.sleep(0.5)
    reindex.send_signal(signal.SIGINT)
    out, err = reindex.communicate(timeout=300)
    assert reindex.returncode == 130, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines[-1] == INTERRUPTED_SYNC, err
    # Else only progress lines: a slow read of MEMORY.md (a loaded machine) says so too.
    assert all(ln.startswith(PROGRESS) for ln in lines[:-1]), err
    assert "Traceback" not in err and out == ""
    kept = len(_vectors(home))
    assert 0 < kept < N_FACTS, kept

    recall = _memclaw(home, "recall", "where does my sister live", "-k", "1")  # (--json would show no progress)
    out, err = recall.communicate(timeout=900)
    assert recall.returncode == 0, err
    progress = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("reading ")]
    assert progress and all(ln.startswith("embedding ") for ln in progress), err  # seconds of work: said
    assert re.search(r": [\d,]+ vectors in \d+ (s|min) \([\d,]+/s\)$", progress[-1]), err  # and how long it took
    totals = {int(m.group(1).replace(",", "")) for ln in progress if (m := re.search(r"/([\d,]+) vectors", ln))}
    assert totals == {N_FACTS - kept}, (totals, kept)  # only what the interrupted reindex had not stored
    assert "Lena lives in Porto" in out

    want = {}
    for u in read_units(mem, scope="owner", kind="fact", source="memory/MEMORY.md"):
        want.update(unit_vectors(u.id, index_text(u)))
    assert _vectors(home) == want
    assert not any(scopes.glob("*/DIRTY"))
